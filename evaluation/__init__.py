"""Measuring Ragline: retrieval quality on BEIR sets (nDCG, recall, MRR, MAP) and answers through
the whole graph (EM, F1, citations, latency). A host: it ingests, builds graphs and drives turns."""
