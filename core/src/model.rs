//! Rates, percentages and peaks derived from stored samples.
