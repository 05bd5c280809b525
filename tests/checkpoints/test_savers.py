

async def test_a_new_sqlite_saver_can_delete_a_thread_before_any_write(tmp_path):
    from ragline.checkpoints.savers import sqlite_saver

    async with sqlite_saver(tmp_path / "fresh.sqlite") as saver:
        await saver.adelete_thread("never-written")  # no "no such table" error


async def test_a_threads_history_on_redis_holds_only_its_own_checkpoints_not_its_subgraphs(redis_server):
    """A turn's progress cards are subgraphs with checkpoints of their own; the thread's history
    (and so a resume, a rewind) must never read one of them as the turn's."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from ragline.checkpoints.savers import redis_saver
    from ragline.service.threads import thread_config

    class State(TypedDict, total=False):
        steps: int

    async def step(state: State) -> State:
        return {"steps": state.get("steps", 0) + 1}

    card = StateGraph(State)
    card.add_node("inside", step)
    card.add_edge(START, "inside")
    card.add_edge("inside", END)
    graph = StateGraph(State)
    graph.add_node("card", card.compile())
    graph.add_node("after", step)
    graph.add_edge(START, "card")
    graph.add_edge("card", "after")
    graph.add_edge("after", END)
    redis_server.flush()
    async with redis_saver(redis_server.url) as saver:
        compiled = graph.compile(checkpointer=saver)
        await compiled.ainvoke({"steps": 0}, thread_config("t"), durability="sync")
        history = [state async for state in compiled.aget_state_history(thread_config("t"))]
        assert history and {state.config["configurable"]["checkpoint_ns"] for state in history} == {""}
        newest = [state async for state in compiled.aget_state_history(thread_config("t"), limit=1)]
        assert newest[0].values == {"steps": 2} and not newest[0].next
