"""From raw records to the paper: aggregation, statistics, quality, figures, tables."""
