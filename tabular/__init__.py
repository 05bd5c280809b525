"""Tabular data analysis: one read-only DuckDB query over a CSV or Excel document
(seed: tools.NewDataAnalysisTool, data_analysis.go)."""
