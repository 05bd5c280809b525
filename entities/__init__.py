"""The entity graph: extraction with the model, a graph store (DuckDB or Neo4j), entity search."""
