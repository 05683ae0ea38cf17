/** Static facts about a definition's graph, computed once per definition. */
import type { EdgeDefinition, WorkflowDefinition } from "./model.ts";

export interface GraphInfo {
  incoming: Map<string, EdgeDefinition[]>;
  outgoing: Map<string, EdgeDefinition[]>;
  /** reach.get(a) = nodes reachable from a by one or more edges. */
  reach: Map<string, Set<string>>;
  /** Nodes on some cycle. */
  cyclic: Set<string>;
  /** The strongly connected component (id) of each node. */
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

export function graphOf(def: Pick<WorkflowDefinition, "nodes" | "edges">): GraphInfo {
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
  const reach = new Map<string, Set<string>>();
  for (const n of def.nodes) {
    const seen = new Set<string>();
    const stack = (outgoing.get(n.id) ?? []).map((e) => e.to);
    while (stack.length) {
      const id = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      for (const e of outgoing.get(id) ?? []) stack.push(e.to);
    }
    reach.set(n.id, seen);
  }
  const cyclic = new Set(def.nodes.filter((n) => reach.get(n.id)!.has(n.id)).map((n) => n.id));
  const scc = new Map<string, number>();
  let next = 0;
  for (const n of def.nodes) {
    if (scc.has(n.id)) continue;
    const id = next++;
    scc.set(n.id, id);
    for (const m of reach.get(n.id)!) if (reach.get(m)!.has(n.id)) scc.set(m, id);
  }
  const info = { incoming, outgoing, reach, cyclic, scc, edgeKey, edgeByKey };
  cache.set(def, info);
  return info;
}

/** Nodes re-run when the back edge `from → head` is taken: the head and everything between it and `from`. */
export function loopRegion(g: GraphInfo, head: string, from: string): Set<string> {
  const region = new Set<string>([head, from]);
  for (const v of g.reach.get(head) ?? []) if (v === from || g.reach.get(v)?.has(from)) region.add(v);
  return region;
}
