//! `#[cluster_test]` and `#[cluster_test(PHASE)]`: what every real-cluster test is.
//!
//! Expands to `#[test]`, `#[ignore = "needs the test cluster: scripts/test.sh"]` (plain
//! `cargo test` stays fast; the README's test command runs them with `--ignored`) and, with a
//! phase, a first statement `if !runs_in("<the test's own name>", PHASE) { return; }` — the
//! only early return a cluster test may have, recorded so that `scripts/check-phases.sh` fails
//! a test that never ran in any phase. The name is taken from the function, so it cannot
//! drift from it.
//!
//! Written on `proc_macro` alone (no `syn`): the item is a plain `fn name() { … }`, and all
//! that is needed is its name and its body's braces.

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

#[proc_macro_attribute]
pub fn cluster_test(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let name = tokens.windows(2).find_map(|w| match (&w[0], &w[1]) {
        (TokenTree::Ident(f), TokenTree::Ident(n)) if f.to_string() == "fn" => Some(n.to_string()),
        _ => None,
    });
    let (Some(name), Some(TokenTree::Group(body))) = (name, tokens.pop()) else {
        return error("#[cluster_test] goes on a plain `fn name() { … }`");
    };
    if body.delimiter() != Delimiter::Brace {
        return error("#[cluster_test] goes on a plain `fn name() { … }`");
    }
    let mut inner = TokenStream::new();
    if !attr.is_empty() {
        let gate: TokenStream = format!(
            "if !::slurmwatch_tests::runs_in({}, {attr}) {{ return; }}",
            Literal::string(&name)
        )
        .parse()
        .expect("a well-formed phase gate");
        inner.extend(gate);
    }
    inner.extend(body.stream());
    let mut out: TokenStream = "#[test] #[ignore = \"needs the test cluster: scripts/test.sh\"]"
        .parse()
        .expect("well-formed attributes");
    out.extend(tokens);
    let mut new_body = Group::new(Delimiter::Brace, inner);
    new_body.set_span(body.span());
    out.extend([TokenTree::Group(new_body)]);
    out
}

/// `compile_error!(msg)`.
fn error(msg: &str) -> TokenStream {
    [
        TokenTree::Ident(Ident::new("compile_error", Span::call_site())),
        TokenTree::Punct(Punct::new('!', Spacing::Alone)),
        TokenTree::Group(Group::new(
            Delimiter::Parenthesis,
            [TokenTree::Literal(Literal::string(msg))]
                .into_iter()
                .collect(),
        )),
    ]
    .into_iter()
    .collect()
}
