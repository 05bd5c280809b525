"""The turn's vocabulary, at the bottom of every layer: the request, the state and its reducers,
the passage, the events and their sink, the run context and the turn's ids, the thread's message
keys. It imports no container, node, graph or host: everything above builds on it."""
