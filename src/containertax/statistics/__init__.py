"""What is true of the data: raw records to tidy tables, data quality, the comparisons and
their correction, the decision table, the stopping rule's looks, and last the findings
table (stats/findings.csv), the seam that publishing reads. Never imports publishing."""
