"""What is said and how it looks: the paper's values, tables, figures and words, its build
and review, the study paper and the live status page, from the findings table and the
statistics' results (publishing imports statistics, never the other way)."""
