/** Static facts about a definition's graph, computed once per definition. */
import type { EdgeDefinition, Join } from "./model.ts";

export interface GraphInfo {
  incoming: Map<string, EdgeDefinition[]>;
  outgoing: Map<string, EdgeDefinition[]>;
  /** Nodes on some cycle. */
  cyclic: Set<string>;
  /**
   * The strongly connected component (id) of each node: two nodes share one when each reaches
   * the other. For an edge a → b, b reaches a exactly when they share a component.
   */
  scc: Map<string, number>;
  /**
   * The key of each edge's decision in the execution state: `from->to` for the first edge
   * between two nodes (in definition order), `from->to#2`, `from->to#3`... for further ones,
   * so parallel edges are decided apart while checkpoints written before they were told apart
   * (every key `from->to`) keep their meaning.
   */
  edgeKey: Map<EdgeDefinition, string>;
  /** The edge of each key of {@link GraphInfo.edgeKey}. */
  edgeByKey: Map<string, EdgeDefinition>;
}

/** The node an edge-state key leaves from (node ids hold no ">"). */
export function edgeKeySource(key: string): string {
  return key.slice(0, key.indexOf("->"));
}

const cache = new WeakMap<object, GraphInfo>();

export function graphOf(def: { readonly nodes: readonly { id: string }[]; readonly edges: readonly EdgeDefinition[] }): GraphInfo {
  const hit = cache.get(def);
  if (hit) return hit;
  const incoming = new Map<string, EdgeDefinition[]>();
  const outgoing = new Map<string, EdgeDefinition[]>();
  for (const n of def.nodes) {
    incoming.set(n.id, []);
    outgoing.set(n.id, []);
  }
  const edgeKey = new Map<EdgeDefinition, string>();
  const edgeByKey = new Map<string, EdgeDefinition>();
  const pairs = new Map<string, number>();
  for (const e of def.edges) {
    outgoing.get(e.from)?.push(e);
    incoming.get(e.to)?.push(e);
    const pair = `${e.from}->${e.to}`;
    const k = (pairs.get(pair) ?? 0) + 1;
    pairs.set(pair, k);
    const key = k === 1 ? pair : `${pair}#${k}`;
    edgeKey.set(e, key);
    edgeByKey.set(key, e);
  }
  // Components by Tarjan's algorithm (linear): a set of every node's reachable nodes would
  // take memory and time of the square of the graph (a chain of 10,000 nodes: 1.5 GB, 30 s).
  const cyclic = new Set<string>();
  const scc = new Map<string, number>();
  let next = 0;
  for (const comp of cyclicComponents({ nodes: def.nodes.map((n) => n.id), edges: def.edges })) {
    const id = next++;
    for (const v of comp) {
      cyclic.add(v);
      scc.set(v, id);
    }
  }
  for (const n of def.nodes) if (!scc.has(n.id)) scc.set(n.id, next++);
  const info = { incoming, outgoing, cyclic, scc, edgeKey, edgeByKey };
  cache.set(def, info);
  return info;
}

const regions = new WeakMap<GraphInfo, Map<string, Set<string>>>();

/**
 * Nodes re-run when the edge `from → head` closes a loop: the head and every node on a way
 * from it back to one of the edges that close a loop to it (the edges from the nodes it
 * dominates, and `from → head`): each node that reaches the source of one of them without
 * passing through the head (their natural regions). So a round of a cycle starts with nothing
 * left of the one before, also on a branch that went back to the head on another edge. When
 * the head is a whileLoop its whole body ({@link loopBody}) is taken in as well, a body node
 * with an edge from outside the loop included, but not one that dominates the head (a node
 * before the loop that a branch of the body goes back to: the pass did not run it). A path
 * back only through the head again leaves a node out: an enclosing loop's head, reached
 * through this loop's exit, is not part of this loop, so an inner loop's iteration does not
 * restart (and reset the count of) the loop around it.
 */
export function loopRegion(g: GraphInfo, head: string, from: string, start: string): Set<string> {
  let cached = regions.get(g);
  if (!cached) regions.set(g, (cached = new Map<string, Set<string>>()));
  const key = `${from}->${head}@${start}`;
  const hit = cached.get(key);
  if (hit) return hit;
  // A node that comes before the head on every way from the start ran before the head in this
  // round: it is on a way back only through a loop of its own (the head being on a cycle entered
  // at several nodes, none of which comes first), and is not reset, nor what reaches the
  // source only through it.
  const loop = g.scc.get(head);
  const before = loopsOf(g, start).dom.get(head);
  const region = new Set<string>([head]);
  for (const source of [from, ...(loopsOf(g, start).back.get(head) ?? [])]) {
    if (region.has(source) || before?.has(source) === true) continue;
    region.add(source);
    const stack = [source];
    while (stack.length) {
      const v = stack.pop()!;
      for (const e of g.incoming.get(v) ?? []) {
        const u = e.from;
        if (u === head || region.has(u) || g.scc.get(u) !== loop || before?.has(u) === true) continue;
        region.add(u);
        stack.push(u);
      }
    }
  }
  // A body node that comes before the loop on every way from the start (a body branch that goes
  // back to a node before the loop) ran before the loop was entered: a pass does not reset it.
  for (const v of loopBody(g, head)) if (before?.has(v) !== true) region.add(v);
  cached.set(key, region);
  return region;
}

const bodies = new WeakMap<GraphInfo, Map<string, Set<string>>>();
const passes = new WeakMap<GraphInfo, Map<string, Set<string>>>();

/** Nodes reachable from `from` along `next` without passing through `avoid` (or `also`). */
export function reachAvoiding(from: readonly string[], next: (v: string) => readonly string[], avoid: string, also?: string): Set<string> {
  const seen = new Set(from.filter((v) => v !== avoid && v !== also));
  const stack = [...seen];
  while (stack.length) {
    for (const u of next(stack.pop()!)) {
      if (u === avoid || u === also || seen.has(u)) continue;
      seen.add(u);
      stack.push(u);
    }
  }
  return seen;
}

/**
 * Nodes on a cycle through a whileLoop's exit that does not pass through `avoid`: its exit edges
 * lead to them, and they back to it, through neither; the loop itself too when there is such a
 * cycle (an exit edge straight back to it is one).
 */
function exitCycle(g: GraphInfo, loop: string, avoid?: string): Set<string> {
  const out = (v: string): string[] => (g.outgoing.get(v) ?? []).map((e) => e.to);
  const exits = (g.outgoing.get(loop) ?? []).filter((e) => e.when === "exit").map((e) => e.to);
  const back = reachAvoiding((g.incoming.get(loop) ?? []).map((e) => e.from), (v) => (g.incoming.get(v) ?? []).map((e) => e.from), loop, avoid);
  const cycle = new Set([...reachAvoiding(exits, out, loop, avoid)].filter((v) => back.has(v)));
  if (cycle.size > 0 || exits.includes(loop)) cycle.add(loop);
  return cycle;
}

/**
 * The body of a whileLoop: the nodes on a way from one of its `body` edges back to it that does
 * not pass through it again (the loop itself not included). A pass of the loop runs them; a
 * nested loop and its body are part of it, and the head of a loop around it is not (that is
 * reached through this loop's exit).
 */
export function loopBody(g: GraphInfo, loop: string): Set<string> {
  let cached = bodies.get(g);
  if (!cached) bodies.set(g, (cached = new Map<string, Set<string>>()));
  const hit = cached.get(loop);
  if (hit) return hit;
  const out = (v: string): string[] => (g.outgoing.get(v) ?? []).map((e) => e.to);
  const forward = reachAvoiding((g.outgoing.get(loop) ?? []).filter((e) => e.when === "body").map((e) => e.to), out, loop);
  const back = reachAvoiding((g.incoming.get(loop) ?? []).map((e) => e.from), (v) => (g.incoming.get(v) ?? []).map((e) => e.from), loop);
  const body = new Set([...forward].filter((v) => back.has(v)));
  cached.set(loop, body);
  return body;
}

/**
 * The nodes whose `maxVisits` counts their visits in one pass of a whileLoop: its body, less the
 * nodes its exit edges also lead to without passing through it. Those are on a cycle that leaves
 * the loop by its exit, which no iteration counts, so their count must go on across its passes.
 * Less, too, when a loop in its body has it in its own body (each is in the other's: neither is
 * inside the other) and each has a cycle through its exit that does not pass through the other,
 * the nodes on the other loop's such cycle, that loop included: each time round it restarts the other loop's count,
 * and no iteration of this one counts it, so the passes of each restarting the counts of the
 * other's cycle would let the two loops restart each other for ever.
 */
export function passNodes(g: GraphInfo, loop: string): Set<string> {
  let cached = passes.get(g);
  if (!cached) passes.set(g, (cached = new Map<string, Set<string>>()));
  const hit = cached.get(loop);
  if (hit) return hit;
  const body = loopBody(g, loop);
  const own = exitCycle(g, loop);
  const pass = new Set([...body].filter((v) => !own.has(v)));
  for (const m of body) {
    if (!(g.outgoing.get(m) ?? []).some((e) => e.when === "body") || !loopBody(g, m).has(loop)) continue;
    const theirs = exitCycle(g, m, loop);
    if (theirs.size === 0 || exitCycle(g, loop, m).size === 0) continue;
    for (const v of theirs) pass.delete(v);
  }
  cached.set(loop, pass);
  return pass;
}

/** The loop heads of a graph from a start, and the sources of the edges that close a loop to each. */
interface Loops {
  heads: Set<string>;
  back: Map<string, string[]>;
  dom: Dominance;
}

const loops = new WeakMap<GraphInfo, Map<string, Loops>>();

function loopsOf(g: GraphInfo, start: string): Loops {
  let cached = loops.get(g);
  if (!cached) loops.set(g, (cached = new Map<string, Loops>()));
  const hit = cached.get(start);
  if (hit) return hit;
  const edges = [...g.edgeKey.keys()];
  const dom = dominators({ nodes: [...g.incoming.keys()], edges }, start);
  const heads = new Set<string>();
  const back = new Map<string, string[]>();
  const forward: EdgeDefinition[] = [];
  for (const e of edges) {
    if (dom.get(e.from)?.has(e.to) === true) {
      heads.add(e.to);
      const b = back.get(e.to);
      if (b) b.push(e.from);
      else back.set(e.to, [e.from]);
    } else {
      forward.push(e);
    }
  }
  // Cycles left without their back edges have no head that comes first (or are not reached from the start).
  for (const comp of cyclicComponents({ nodes: [...g.incoming.keys()], edges: forward })) for (const v of comp) heads.add(v);
  const out = { heads, back, dom };
  cached.set(start, out);
  return out;
}

/**
 * The nodes that join as `any` when their definition leaves `join` out: the loop heads. A
 * node is one when an edge closes a loop back to it (the edge's source only runs after it: it
 * dominates the source, every way from `start` to the source passing through it), or when it
 * is on a cycle that has no such head (entered at several of its nodes, none of which comes
 * first). Every other node, inside a loop body or not, waits for all its incoming edges, so a
 * join in a loop body waits for the branches of its pass.
 */
export function loopHeads(g: GraphInfo, start: string): Set<string> {
  return loopsOf(g, start).heads;
}

/**
 * The sources of the edges that close a loop back to `head` (each only runs after `head`: it
 * dominates them), or undefined when none does. While `head` has not run in a pass, such an edge
 * cannot be taken in it: a head whose other edges are all dead is skipped, not left waiting.
 */
export function backEdgeSources(g: GraphInfo, start: string, head: string): readonly string[] | undefined {
  return loopsOf(g, start).back.get(head);
}

/**
 * The join a node runs with: its own `join`, else `any` for a loop head ({@link loopHeads}) and
 * `all` for every other node. The engine joins by it, and validation checks the joins it gives,
 * so a definition is refused for the joins it would run with.
 */
export function joinOf(g: GraphInfo, start: string, id: string, join: Join | undefined): Join {
  if (join !== undefined) return join;
  return loopHeads(g, start).has(id) ? "any" : "all";
}

/** A graph as validation sees it: node ids and the edges between them (possibly a part of a broken definition). */
export interface PlainGraph {
  nodes: readonly string[];
  edges: readonly { from: string; to: string }[];
}

/** Strongly connected components that hold a cycle (two or more nodes, or one with an edge to itself), in node order. */
export function cyclicComponents(g: PlainGraph): string[][] {
  const out = new Map<string, string[]>(g.nodes.map((n) => [n, []]));
  const selfLoop = new Set<string>();
  for (const e of g.edges) {
    if (!out.has(e.from) || !out.has(e.to)) continue;
    out.get(e.from)!.push(e.to);
    if (e.from === e.to) selfLoop.add(e.from);
  }
  // Tarjan's algorithm, iteratively so that long chains do not exhaust the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const comps: string[][] = [];
  let next = 0;
  for (const root of g.nodes) {
    if (index.has(root)) continue;
    const work: { v: string; i: number }[] = [{ v: root, i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const succ = out.get(top.v)!;
      if (top.i < succ.length) {
        const w = succ[top.i++]!;
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push({ v: w, i: 0 });
        } else if (onStack.has(w)) {
          low.set(top.v, Math.min(low.get(top.v)!, index.get(w)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.v;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.v)!));
      }
      if (low.get(top.v) === index.get(top.v)) {
        const comp: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          comp.push(w);
        } while (w !== top.v);
        if (comp.length > 1 || selfLoop.has(top.v)) comps.push(comp);
      }
    }
  }
  const order = new Map(g.nodes.map((n, i) => [n, i]));
  for (const c of comps) c.sort((a, b) => order.get(a)! - order.get(b)!);
  return comps.sort((a, b) => order.get(a[0]!)! - order.get(b[0]!)!);
}

/**
 * The cycles no loop bound stops: the cyclic components left once every bounded node (a node
 * with maxVisits) and every counted edge is taken out. A cycle through a bounded node, or
 * along a counted edge (a whileLoop's body edge: each pass along it counts an iteration), is
 * bounded; one that leaves a whileLoop by its exit edge is not, since exiting counts nothing.
 */
export function unboundedCycles<E extends PlainGraph["edges"][number]>(
  g: { nodes: readonly string[]; edges: readonly E[] },
  bounded: (id: string) => boolean,
  counted: (e: E) => boolean = () => false,
): string[][] {
  const keep = g.nodes.filter((n) => !bounded(n));
  const kept = new Set(keep);
  return cyclicComponents({ nodes: keep, edges: g.edges.filter((e) => kept.has(e.from) && kept.has(e.to) && !counted(e)) });
}

/** Nodes reachable from `start` (itself included). */
export function reachableFrom(g: PlainGraph, start: string): Set<string> {
  const out = new Map<string, string[]>();
  for (const e of g.edges) {
    let o = out.get(e.from);
    if (!o) out.set(e.from, (o = []));
    o.push(e.to);
  }
  const seen = new Set<string>([start]);
  const todo = [start];
  while (todo.length > 0) {
    for (const w of out.get(todo.pop()!) ?? []) {
      if (!seen.has(w)) {
        seen.add(w);
        todo.push(w);
      }
    }
  }
  return seen;
}

/** Who dominates whom among the nodes reachable from a start (see {@link dominators}). */
export interface Dominance {
  /** Whether `v` is reachable from the start. */
  has(v: string): boolean;
  /** The dominators of `v`, as a set to ask `has(d)`: whether every path from the start to `v` passes through `d`. Undefined for an unreachable `v`. */
  get(v: string): { has(d: string): boolean } | undefined;
  /** The immediate dominator of `v` (the start's is itself); undefined for an unreachable `v`. */
  idom(v: string): string | undefined;
}

/**
 * Dominators of every node reachable from `start`: `d` dominates `v` when every path from the
 * start to `v` passes through `d` (each node dominates itself). The immediate dominators come
 * from the iterative algorithm of Cooper, Harvey and Kennedy over a reverse postorder, and a
 * walk of the dominator tree numbers it so that each question is answered in constant time:
 * memory and time grow with the graph, not its square (a chain of 20,000 nodes is quick).
 */
export function dominators(g: PlainGraph, start: string): Dominance {
  const succ = new Map<string, string[]>();
  const pred = new Map<string, string[]>();
  for (const e of g.edges) {
    let s = succ.get(e.from);
    if (!s) succ.set(e.from, (s = []));
    s.push(e.to);
    let p = pred.get(e.to);
    if (!p) pred.set(e.to, (p = []));
    p.push(e.from);
  }
  // Postorder numbers by an iterative depth-first walk.
  const post = new Map<string, number>();
  const order: string[] = [];
  const seen = new Set<string>([start]);
  const stack: { v: string; i: number }[] = [{ v: start, i: 0 }];
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const next = (succ.get(top.v) ?? [])[top.i++];
    if (next === undefined) {
      post.set(top.v, order.length);
      order.push(top.v);
      stack.pop();
    } else if (!seen.has(next)) {
      seen.add(next);
      stack.push({ v: next, i: 0 });
    }
  }
  const idom = new Map<string, string>([[start, start]]);
  const intersect = (a: string, b: string): string => {
    while (a !== b) {
      while (post.get(a)! < post.get(b)!) a = idom.get(a)!;
      while (post.get(b)! < post.get(a)!) b = idom.get(b)!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = order.length - 1; k >= 0; k--) {
      const v = order[k]!;
      if (v === start) continue;
      let d: string | undefined;
      for (const p of pred.get(v) ?? []) {
        if (!idom.has(p)) continue;
        d = d === undefined ? p : intersect(p, d);
      }
      if (d !== undefined && idom.get(v) !== d) {
        idom.set(v, d);
        changed = true;
      }
    }
  }
  // Entry and exit numbers of a walk of the dominator tree: d dominates v when v's interval lies in d's.
  const children = new Map<string, string[]>();
  for (const [v, d] of idom) {
    if (v === start) continue;
    let c = children.get(d);
    if (!c) children.set(d, (c = []));
    c.push(v);
  }
  const tin = new Map<string, number>();
  const tout = new Map<string, number>();
  let clock = 0;
  const walk: { v: string; i: number }[] = [{ v: start, i: 0 }];
  tin.set(start, clock++);
  while (walk.length) {
    const top = walk[walk.length - 1]!;
    const c = (children.get(top.v) ?? [])[top.i++];
    if (c === undefined) {
      tout.set(top.v, clock++);
      walk.pop();
    } else {
      tin.set(c, clock++);
      walk.push({ v: c, i: 0 });
    }
  }
  return {
    has: (v) => tin.has(v),
    idom: (v) => idom.get(v),
    get: (v) => {
      const vin = tin.get(v);
      if (vin === undefined) return undefined;
      const vout = tout.get(v)!;
      return { has: (d) => { const din = tin.get(d); return din !== undefined && din <= vin && vout <= tout.get(d)!; } };
    },
  };
}
