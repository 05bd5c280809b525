"""PipelineBuilder: the seed's pipelines as LangGraph StateGraphs (types.NewPipelineBuilder).

`add` / `add_if` list stages in order; `compile_pipeline` turns the list into a graph that reads
like the pipeline:

- inside a stage, its plugin chain as plain edges (parallel branches joined by the next node);
- at each stage boundary one router whose path map names only the places it can really reach:
  the next stage, the stages an AddIf (or an intent that needs no retrieval) can skip to, the
  fallback answer after a search that may find nothing, and END;
- a progress window (the seed's progress card) is an `open_<window>` node before its first stage
  and a `close_<window>` node that every way out of the window passes through.

Routers decide in the seed's order: a stopped run ends at once (a stop must never look like
"nothing found"); "search found nothing" goes to the fallback; any other error ends the turn;
otherwise the next stage whose conditions hold runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime, get_runtime

from ragline.graph.context import RunContext, context_of
from ragline.graph.events import ProgressWindow
from ragline.graph.progress import close_name, close_window, open_name, open_window
from ragline.graph.request import PipelineRequest
from ragline.graph.stages import STAGE_NODES, Parallel, Stage, StageSpec
from ragline.graph.state import (
    ErrorKind,
    PipelineInput,
    PipelineOutput,
    PipelineState,
    needs_retrieval,
)
from ragline.nodes.begin_turn import begin_turn
from ragline.nodes.fallback import fallback

Condition = Callable[[PipelineState], bool]
Graph = CompiledStateGraph[PipelineState, RunContext, PipelineInput, PipelineOutput]  # a compiled pipeline
BEGIN, FALLBACK = "begin_turn", "fallback"


class PipelineBuildError(ValueError):
    """A pipeline the graph cannot express (e.g. a window entered past its first stage)."""


@dataclass(frozen=True)
class Step:
    stage: Stage
    conditions: tuple[Condition, ...] = ()  # AddIf: the stage runs only when all hold


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]

    @property
    def stages(self) -> list[Stage]:
        return [step.stage for step in self.steps]


class PipelineBuilder:
    def __init__(self, name: str = "pipeline") -> None:
        self._name = name
        self._steps: list[Step] = []

    def add(self, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage))
        return self

    def add_if(self, condition: Condition, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage, (condition,)))
        return self

    def build(self) -> Pipeline:
        return Pipeline(self._name, tuple(self._steps))


# --- AddIf conditions, evaluated on the request/state when the previous stage ends ---


def _request(state: PipelineState) -> PipelineRequest:
    return state["request"]


def has_history(state: PipelineState) -> bool:
    """Multi-turn is on and the thread has an earlier answer."""
    return _request(state).max_history_rounds > 0 and any(m.type == "ai" for m in state.get("messages", []))


def web_search_enabled(state: PipelineState) -> bool:
    return _request(state).web_search_enabled


def data_analysis_enabled(state: PipelineState) -> bool:
    return _request(state).data_analysis_enabled


def uses_knowledge(state: PipelineState) -> bool:
    """The seed's choice of the RAG pipeline: a knowledge base in scope or web search on."""
    return _request(state).uses_knowledge


def intent_needs_retrieval(state: PipelineState) -> bool:
    """NeedsRetrieval: the implicit condition of every stage marked needs_retrieval."""
    return needs_retrieval(state.get("intent", ""), _request(state))


# --- the seed's pipelines (session_knowledge_qa.go) and static presets (types.Pipeline) ---


def chat_pipeline() -> Pipeline:
    """Pure chat: no knowledge base and no web search."""
    return (
        PipelineBuilder("chat_pipeline")
        .add_if(has_history, Stage.LOAD_HISTORY)
        .add(Stage.MEMORY_RECALL)
        .add(Stage.CHAT_COMPLETION_STREAM)
        .build()
    )


def rag_pipeline() -> Pipeline:
    return (
        PipelineBuilder("rag_pipeline")
        .add_if(has_history, Stage.LOAD_HISTORY)
        .add(Stage.MEMORY_RECALL)
        .add(Stage.QUERY_UNDERSTAND)
        .add(Stage.CHUNK_SEARCH_PARALLEL)
        .add(Stage.CHUNK_RERANK)
        .add_if(web_search_enabled, Stage.WEB_FETCH)
        .add(Stage.CHUNK_MERGE)
        .add(Stage.FILTER_TOP_K)
        .add_if(data_analysis_enabled, Stage.DATA_ANALYSIS)
        .add(Stage.INTO_CHAT_MESSAGE)
        .add(Stage.CHAT_COMPLETION_STREAM)
        .build()
    )


def dynamic_pipeline() -> Pipeline:
    """Both seed pipelines in one graph: the RAG-only stages run only when knowledge is in scope.

    The chat pipeline is a subsequence of the RAG pipeline, so gating the difference with
    `uses_knowledge` picks per request exactly the list KnowledgeQA would have built.
    """
    chat_stages = set(chat_pipeline().stages)
    steps = [
        step if step.stage in chat_stages else Step(step.stage, (uses_knowledge, *step.conditions))
        for step in rag_pipeline().steps
    ]
    return Pipeline("ragline", tuple(steps))


PRESETS: dict[str, Callable[[], Pipeline]] = {
    "chat": lambda: PipelineBuilder("chat").add(Stage.CHAT_COMPLETION).build(),
    "chat_stream": lambda: PipelineBuilder("chat_stream").add(Stage.CHAT_COMPLETION_STREAM).build(),
    "chat_history_stream": lambda: PipelineBuilder("chat_history_stream")
    .add_if(has_history, Stage.LOAD_HISTORY)
    .add(Stage.MEMORY_RECALL)
    .add(Stage.CHAT_COMPLETION_STREAM)
    .build(),
    "rag": lambda: PipelineBuilder("rag")
    .add(Stage.QUERY_UNDERSTAND)
    .add(Stage.CHUNK_SEARCH)
    .add(Stage.CHUNK_RERANK)
    .add(Stage.CHUNK_MERGE)
    .add(Stage.INTO_CHAT_MESSAGE)
    .add(Stage.CHAT_COMPLETION)
    .build(),
    "rag_stream": rag_pipeline,
}


# --- the plan: where each router may go, worked out once from the step list ---


@dataclass(frozen=True)
class _Placed:
    """One step of the pipeline with what the graph needs to know about it."""

    step: Step
    spec: StageSpec

    @property
    def requires(self) -> frozenset[Condition]:
        extra = (intent_needs_retrieval,) if self.spec.needs_retrieval else ()
        return frozenset((*self.step.conditions, *extra))

    @property
    def window(self) -> ProgressWindow | None:
        return self.spec.window

    @property
    def entry(self) -> str:
        first = self.spec.chain[0]
        if isinstance(first, Parallel):
            raise PipelineBuildError(f"stage {self.step.stage} cannot begin with parallel branches")
        return first.node_name

    @property
    def exit(self) -> str:
        last = self.spec.chain[-1]
        if isinstance(last, Parallel):
            raise PipelineBuildError(f"stage {self.step.stage} cannot end with parallel branches: the next node must join them")
        return last.node_name

    def runs(self, state: PipelineState) -> bool:
        return all(condition(state) for condition in self.requires)


@dataclass
class _Plan:
    placed: list[_Placed]
    windows: dict[ProgressWindow, tuple[int, int]] = field(default_factory=dict)  # first and last step index

    @classmethod
    def of(cls, pipeline: Pipeline, stages: dict[Stage, StageSpec]) -> _Plan:
        plan = cls([_Placed(step, stages[step.stage]) for step in pipeline.steps if step.stage in stages])
        for index, placed in enumerate(plan.placed):
            window = placed.window
            if window is None:
                continue
            first, last = plan.windows.get(window, (index, index))
            if last not in (index, index - 1):
                raise PipelineBuildError(f"the stages of the {window.value} window must be adjacent")
            plan.windows[window] = (first, index)
        return plan

    def known_true(self, after: int, inside: ProgressWindow | None) -> frozenset[Condition]:
        """Conditions that must hold at this point: those of the step that ran, and of the window's first step."""
        known: set[Condition] = set()
        if after >= 0:
            known |= self.placed[after].requires
        if inside is not None:
            known |= self.placed[self.windows[inside][0]].requires
        return frozenset(known)

    def may_find_nothing(self, first: int, last: int) -> bool:
        return any(p.spec.finds_nothing for p in self.placed[first : last + 1])

    def entry_of(self, index: int, inside: ProgressWindow | None) -> str:
        """The node that starts step `index` when reached from within `inside` (or from no window)."""
        placed = self.placed[index]
        window = placed.window
        if window is not None and window != inside:
            if self.windows[window][0] != index:
                raise PipelineBuildError(f"{placed.step.stage} can be reached without the first stage of its {window.value} window")
            return open_name(window)
        return placed.entry

    def _walk(self, after: int, inside: ProgressWindow | None, known_true: frozenset[Condition]) -> list[str]:
        """The stage entries reachable after step `after`, in pipeline order.

        A stage whose conditions are all known to hold ends the walk; a stage skipped for a single
        unknown condition proves that condition false for the stages after it.
        """
        targets: list[str] = []
        known_false: set[Condition] = set()
        for index in range(after + 1, len(self.placed)):
            placed = self.placed[index]
            if placed.requires & known_false:
                continue  # a condition already known to fail: this stage cannot run from here
            if inside is not None and placed.window != inside:
                break  # leaving the window: its close node decides what follows
            targets.append(self.entry_of(index, inside))
            unknown = placed.requires - known_true
            if not unknown:
                break  # runs for certain: nothing after it is reachable from here
            if len(unknown) == 1:
                known_false |= unknown
        return targets

    def targets(self, after: int, inside: ProgressWindow | None) -> list[str]:
        """Every node the router after step `after` can choose (after = -1: after begin_turn)."""
        targets = self._walk(after, inside, self.known_true(after, inside))
        if inside is not None:
            targets.append(close_name(inside))  # stops, errors and the way on all leave through the card's close
        else:
            if after >= 0 and self.placed[after].spec.finds_nothing:
                targets.append(FALLBACK)
            targets.append(END)  # a stop, an error, or nothing left to run
        return list(dict.fromkeys(targets))

    def close_targets(self, window: ProgressWindow) -> list[str]:
        """Where the run goes once the window's card is closed."""
        first, last = self.windows[window]
        targets = self._walk(last, None, self.placed[first].requires)
        if self.may_find_nothing(first, last):
            targets.append(FALLBACK)
        targets.append(END)
        return list(dict.fromkeys(targets))

    def route(self, after: int, inside: ProgressWindow | None, state: PipelineState, context: RunContext) -> str:
        """Where the run goes when step `after` ends (or `inside`'s close node when after is the window's last)."""
        if context.is_cancelled():
            return close_name(inside) if inside is not None else END
        error = state.get("error")
        if error is not None:
            if inside is not None:
                return close_name(inside)
            return FALLBACK if error.kind == ErrorKind.SEARCH_NOTHING else END
        for index in range(after + 1, len(self.placed)):
            placed = self.placed[index]
            if not placed.runs(state):
                continue
            if inside is not None and placed.window != inside:
                return close_name(inside)
            return self.entry_of(index, inside)
        return close_name(inside) if inside is not None else END


def _current_context() -> RunContext:
    try:
        return context_of(get_runtime())
    except Exception:  # outside a run (graph drawing): nothing is cancelled
        return RunContext()


def _router(plan: _Plan, name: str, targets: list[str], decide: Callable[[PipelineState, RunContext], str]) -> Callable[[PipelineState], str]:
    def route(state: PipelineState) -> str:
        target = decide(state, _current_context())
        if target not in targets:  # the path map is the contract Studio draws: never leave it
            raise PipelineBuildError(f"router {name} chose {target!r}, outside its targets {targets}")
        return target

    route.__name__ = name
    return route


def _with_services(node: Callable[..., Any], services: Any) -> Callable[..., Any]:
    """The node, given `services` when the host's run context carries none (Studio, a parent graph)."""

    async def run(state: PipelineState, runtime: Runtime[RunContext]) -> Any:
        context = context_of(runtime)
        if context.services is None:
            runtime = runtime.override(context=replace(context, services=services))
        return await node(state, runtime)

    run.__name__ = getattr(node, "__name__", "node")
    run.__doc__ = node.__doc__
    return run


# --- compilation ---


def compile_pipeline(
    pipeline: Pipeline,
    *,
    stages: dict[Stage, StageSpec] | None = None,
    checkpointer: Any = None,
    services: Any = None,
    name: str | None = None,
) -> Graph:
    """A StateGraph for `pipeline`, wiring only the stages that have nodes.

    `services` (ragline.services.Services) is used by runs whose context brings none: hosts that
    cannot pass objects in the run context, such as `langgraph dev` or a parent graph.
    """
    plan = _Plan.of(pipeline, STAGE_NODES if stages is None else stages)
    graph = StateGraph(PipelineState, context_schema=RunContext, input_schema=PipelineInput, output_schema=PipelineOutput)

    def add_node(node_name: str, fn: Callable[..., Any]) -> None:
        if node_name in graph.nodes:
            raise PipelineBuildError(f"two stages use the node name {node_name!r}")
        graph.add_node(node_name, _with_services(fn, services) if services is not None else fn)

    def add_router(source: str, targets: list[str], decide: Callable[[PipelineState, RunContext], str]) -> None:
        if len(targets) == 1:
            graph.add_edge(source, targets[0])
        else:
            graph.add_conditional_edges(source, _router(plan, f"after_{source}", targets, decide), targets)

    # nodes in pipeline order, so Studio and the README list them as the seed does
    add_node(BEGIN, begin_turn)
    for index, placed in enumerate(plan.placed):
        window = placed.window
        if window is not None and plan.windows[window][0] == index:
            add_node(open_name(window), open_window(window))
        for item in placed.spec.chain:
            for node in item.branches if isinstance(item, Parallel) else (item,):
                add_node(node.node_name, node.fn)
        if window is not None and plan.windows[window][1] == index:
            first = plan.windows[window][0]
            result_keys = tuple(key for p in plan.placed[first : index + 1] for key in p.spec.result_keys)
            add_node(close_name(window), close_window(window, result_keys))
    if plan.may_find_nothing(0, len(plan.placed) - 1):  # only a pipeline that searches can find nothing
        add_node(FALLBACK, fallback)
        graph.add_edge(FALLBACK, END)

    graph.add_edge(START, BEGIN)
    add_router(BEGIN, plan.targets(-1, None), partial(plan.route, -1, None))
    for window, (first, last) in plan.windows.items():
        graph.add_edge(open_name(window), plan.placed[first].entry)
        add_router(close_name(window), plan.close_targets(window), partial(plan.route, last, None))
    for index, placed in enumerate(plan.placed):
        _wire_chain(graph, placed)
        add_router(placed.exit, plan.targets(index, placed.window), partial(plan.route, index, placed.window))
    return graph.compile(checkpointer=checkpointer, name=name or pipeline.name)


def _wire_chain(graph: StateGraph[Any, Any, Any, Any], placed: _Placed) -> None:
    """The stage's plugin chain as plain edges; parallel branches fan out and the next node joins them."""
    previous: list[str] = []
    for item in placed.spec.chain:
        names = [node.node_name for node in (item.branches if isinstance(item, Parallel) else (item,))]
        if len(previous) == 1:
            for name in names:
                graph.add_edge(previous[0], name)
        elif len(previous) > 1:
            graph.add_edge(previous, names[0])
        previous = names


def stage_nodes(pipeline: Pipeline, stages: dict[Stage, StageSpec] | None = None) -> Sequence[str]:
    """Every stage node of the pipeline in order (the builder's stage list, for checks and docs)."""
    plan = _Plan.of(pipeline, STAGE_NODES if stages is None else stages)
    return [name for placed in plan.placed for name in placed.spec.node_names]
