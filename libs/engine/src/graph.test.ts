/**
 * Rules of the graph helpers validation and the engine rely on:
 * - dominators: d dominates v exactly when v cannot be reached from the start without d
 *   (checked against that definition on random graphs, cycles and unreachable nodes included);
 *   unreachable nodes are absent; a long chain is answered without building a set per node;
 * - graphOf: nodes share a component exactly when each reaches the other; only nodes on a
 *   cycle are cyclic; a chain of 20,000 nodes is taken without a set per node;
 * - loopRegion: the natural regions of every edge that closes a loop to the head — nested loops
 *   do not take in the loop around them (reached only through the inner loop's exit) — and a
 *   whileLoop's whole body;
 * - loopHeads: the targets of edges from nodes they dominate, and the nodes of cycles that have
 *   no such edge; a join in a loop body is none; joinOf: a node's own join, else `any` at a loop
 *   head and `all` elsewhere (the engine's and validation's one rule);
 * - loopBody: what a whileLoop's body edges lead back to it, nested loops included; passNodes:
 *   that, less what its exit edges also lead to (whose visits no pass of it restarts).
 */
import { describe, expect, it } from "@jest/globals";
import { dominators, graphOf, joinOf, loopBody, loopHeads, loopRegion, passNodes, reachableFrom } from "./graph.ts";
import type { PlainGraph } from "./graph.ts";
import type { WorkflowDefinition } from "./model.ts";

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

/** 2 to 10 nodes v0, v1, … and up to twice as many edges, self-loops and repeats included. */
function randomGraph(seed: number): { nodes: string[]; edges: { from: string; to: string }[] } {
  const r = random(seed);
  const n = 2 + Math.floor(r() * 9);
  const nodes = Array.from({ length: n }, (_, i) => `v${i}`);
  const edges = Array.from({ length: Math.floor(r() * n * 2) }, () => ({ from: nodes[Math.floor(r() * n)]!, to: nodes[Math.floor(r() * n)]! }));
  return { nodes, edges };
}

describe("dominators", () => {
  it("agree with the definition (v unreachable without d) on random graphs", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const { nodes, edges } = randomGraph(seed);
      const g: PlainGraph = { nodes, edges };
      const dom = dominators(g, "v0");
      const reach = reachableFrom(g, "v0");
      for (const v of nodes) {
        expect(dom.has(v)).toBe(reach.has(v));
        if (!reach.has(v)) {
          expect(dom.get(v)).toBeUndefined();
          continue;
        }
        for (const d of nodes) {
          const without = d === "v0" ? new Set<string>() : reachableFrom({ nodes, edges: edges.filter((e) => e.from !== d && e.to !== d) }, "v0");
          const expected = d === v || (reach.has(d) && !without.has(v));
          expect({ seed, v, d, dominates: dom.get(v)!.has(d) }).toEqual({ seed, v, d, dominates: expected });
        }
      }
    }
  });

  it("a chain of 20,000 nodes", () => {
    const nodes = Array.from({ length: 20_000 }, (_, i) => `n${i}`);
    const edges = nodes.slice(1).map((to, i) => ({ from: nodes[i]!, to }));
    const dom = dominators({ nodes, edges }, "n0");
    expect(dom.get("n19999")!.has("n12345")).toBe(true);
    expect(dom.get("n12345")!.has("n19999")).toBe(false);
  });
});

describe("graphOf", () => {
  it("components: shared exactly by nodes that reach each other; cyclic only on a cycle", () => {
    for (let seed = 1; seed <= 100; seed++) {
      const { nodes, edges } = randomGraph(seed);
      const g = graphOf({ nodes: nodes.map((id) => ({ id })), edges });
      // reachableFrom counts a node as reaching itself; a cycle needs an edge back to it.
      const reaches = (a: string, b: string) => (a === b ? edges.some((e) => e.from === a && reachableFrom({ nodes, edges }, e.to).has(a)) : reachableFrom({ nodes, edges }, a).has(b));
      for (const a of nodes) {
        expect({ seed, a, cyclic: g.cyclic.has(a) }).toEqual({ seed, a, cyclic: reaches(a, a) });
        for (const b of nodes) {
          if (a === b) continue;
          expect({ seed, a, b, same: g.scc.get(a) === g.scc.get(b) }).toEqual({ seed, a, b, same: reaches(a, b) && reaches(b, a) });
        }
      }
    }
  });

  it("a chain of 20,000 nodes closed into a cycle", () => {
    const ids = Array.from({ length: 20_000 }, (_, i) => `n${i}`);
    const edges = [...ids.slice(1).map((to, i) => ({ from: ids[i]!, to })), { from: "n19999", to: "n0" }];
    const g = graphOf({ nodes: ids.map((id) => ({ id })), edges });
    expect(g.cyclic.size).toBe(20_000);
    expect(g.scc.get("n0")).toBe(g.scc.get("n12345"));
  });
});

describe("loopRegion", () => {
  it("is the back edge's natural region: an inner loop's does not take in the loop around it", () => {
    const def = {
      nodes: ["i", "outer", "ri", "inner", "inc", "onext", "done"].map((id) => ({ id })),
      edges: [
        { from: "i", to: "outer" }, { from: "outer", to: "ri" }, { from: "ri", to: "inner" }, { from: "inner", to: "inc" },
        { from: "inc", to: "inner" }, { from: "inner", to: "onext" }, { from: "onext", to: "outer" }, { from: "outer", to: "done" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([...loopRegion(g, "inner", "inc", "i")].sort()).toEqual(["inc", "inner"]);
    expect([...loopRegion(g, "outer", "onext", "i")].sort()).toEqual(["inc", "inner", "onext", "outer", "ri"]);
  });
});

describe("loopRegion of a cycle with several ways back to its head", () => {
  it("takes in every branch back to the head, not only the one a round came back on", () => {
    const def = {
      nodes: ["s", "work", "chk", "fixA", "fixB", "out"].map((id) => ({ id })),
      edges: [
        { from: "s", to: "work" }, { from: "work", to: "chk" }, { from: "chk", to: "fixA" }, { from: "chk", to: "fixB" },
        { from: "fixA", to: "work" }, { from: "fixB", to: "work" }, { from: "chk", to: "out" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([...loopRegion(g, "work", "fixA", "s")].sort()).toEqual(["chk", "fixA", "fixB", "work"]);
    // A cycle entered at two nodes has no edge closing a loop to either: the region is the edge's own.
    const twoEntries = graphOf({ nodes: ["s", "x", "y"].map((id) => ({ id })), edges: [{ from: "s", to: "x" }, { from: "s", to: "y" }, { from: "x", to: "y" }, { from: "y", to: "x" }] });
    expect([...loopRegion(twoEntries, "x", "y", "s")].sort()).toEqual(["x", "y"]);
  });
});

describe("loopRegion of a whileLoop", () => {
  it("takes in the loop's whole body: the branches that went back to it on other edges too", () => {
    const def = {
      nodes: ["init", "loop", "inc", "c", "x", "y", "done"].map((id) => ({ id })),
      edges: [
        { from: "init", to: "loop" }, { from: "loop", to: "inc", when: "body" }, { from: "inc", to: "c" }, { from: "c", to: "x", when: "true" },
        { from: "c", to: "y", when: "false" }, { from: "x", to: "loop" }, { from: "y", to: "loop" }, { from: "loop", to: "done", when: "exit" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([...loopRegion(g, "loop", "x", "init")].sort()).toEqual(["c", "inc", "loop", "x", "y"]);
    // A cycle's head that is no whileLoop has no body: its region is the natural one.
    expect([...loopRegion(g, "c", "x", "init")].sort()).toEqual(["c", "x"]);
  });
});

describe("loopHeads", () => {
  const heads = (nodes: string[], edges: { from: string; to: string; when?: string }[], start = nodes[0]!) =>
    [...loopHeads(graphOf({ nodes: nodes.map((id) => ({ id })), edges }), start)].sort();

  it("are the nodes edges come back to from nodes that only run after them: a join in a loop body is none", () => {
    // A whileLoop whose body joins two branches.
    expect(heads(["init", "loop", "a", "b", "j", "done"], [
      { from: "init", to: "loop" }, { from: "loop", to: "a", when: "body" }, { from: "loop", to: "b", when: "body" }, { from: "a", to: "j" },
      { from: "b", to: "j" }, { from: "j", to: "loop" }, { from: "loop", to: "done", when: "exit" },
    ])).toEqual(["loop"]);
    // Nested loops, and a retry cycle (work → chk → work) in the inner body.
    expect(heads(["i", "outer", "ri", "inner", "work", "chk", "onext"], [
      { from: "i", to: "outer" }, { from: "outer", to: "ri", when: "body" }, { from: "ri", to: "inner" }, { from: "inner", to: "work", when: "body" },
      { from: "work", to: "chk" }, { from: "chk", to: "work" }, { from: "chk", to: "inner" }, { from: "inner", to: "onext", when: "exit" }, { from: "onext", to: "outer" },
    ])).toEqual(["inner", "outer", "work"]);
    // The start on a cycle.
    expect(heads(["ask", "count", "win"], [{ from: "ask", to: "count" }, { from: "count", to: "ask" }, { from: "ask", to: "win" }])).toEqual(["ask"]);
  });

  it("take in every node of a cycle entered at several nodes, none of which comes first", () => {
    expect(heads(["s", "x", "y"], [{ from: "s", to: "x" }, { from: "s", to: "y" }, { from: "x", to: "y" }, { from: "y", to: "x" }])).toEqual(["x", "y"]);
    // Inside a loop body too: the body's own cycle has no head of its own.
    expect(heads(["loop", "a", "b"], [{ from: "loop", to: "a" }, { from: "loop", to: "b" }, { from: "a", to: "b" }, { from: "b", to: "a" }, { from: "a", to: "loop" }])).toEqual(["a", "b", "loop"]);
  });
});

describe("joinOf", () => {
  it("is a node's own join, else any at a loop head and all elsewhere, a join in a loop body included", () => {
    const g = graphOf({ nodes: ["init", "loop", "a", "b", "j"].map((id) => ({ id })), edges: [
      { from: "init", to: "loop" }, { from: "loop", to: "a", when: "body" }, { from: "loop", to: "b", when: "body" }, { from: "a", to: "j" },
      { from: "b", to: "j" }, { from: "j", to: "loop" },
    ] });
    expect(["init", "loop", "a", "j"].map((id) => joinOf(g, "init", id, undefined))).toEqual(["all", "any", "all", "all"]);
    expect([joinOf(g, "init", "loop", "all"), joinOf(g, "init", "j", "any"), joinOf(g, "init", "j", { n: 1 })]).toEqual(["all", "any", { n: 1 }]);
  });
});

describe("loopBody and passNodes", () => {
  it("a loop's body is what its body edges lead back to it; the nodes its exit also leads to do not count per pass", () => {
    const def = {
      nodes: ["i", "outer", "ri", "inner", "inc", "again", "onext", "done"].map((id) => ({ id })),
      edges: [
        { from: "i", to: "outer" }, { from: "outer", to: "ri", when: "body" }, { from: "ri", to: "inner" }, { from: "inner", to: "inc", when: "body" },
        { from: "inc", to: "inner" }, { from: "inner", to: "again", when: "exit" }, { from: "again", to: "inc" }, { from: "again", to: "onext" },
        { from: "onext", to: "outer" }, { from: "outer", to: "done", when: "exit" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([...loopBody(g, "inner")].sort()).toEqual(["inc"]);
    // inner's exit leads to inc again (through "again"): inc is on a cycle no iteration of inner counts.
    expect([...passNodes(g, "inner")]).toEqual([]);
    expect([...loopBody(g, "outer")].sort()).toEqual(["again", "inc", "inner", "onext", "ri"]);
    expect([...passNodes(g, "outer")].sort()).toEqual(["again", "inc", "inner", "onext", "ri"]);
  });

  it("two loops each in the other's body: neither's passes count the other's exit cycle", () => {
    const def = {
      nodes: ["n0", "n1", "n2", "n4", "n5", "n6"].map((id) => ({ id })),
      edges: [
        { from: "n0", to: "n1" }, { from: "n1", to: "n2" }, { from: "n0", to: "n4" }, { from: "n4", to: "n5" }, { from: "n5", to: "n6" },
        { from: "n2", to: "n6", when: "body" }, { from: "n6", to: "n2", when: "body" }, { from: "n2", to: "n1", when: "exit" }, { from: "n6", to: "n5", when: "exit" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([[...loopBody(g, "n2")].sort(), [...loopBody(g, "n6")].sort()]).toEqual([["n5", "n6"], ["n1", "n2"]]);
    // n5 → n6 →exit→ n5 is n6's exit cycle, n1 → n2 →exit→ n1 n2's: each loop's pass leaves the
    // other's alone, the other loop included (it is on its own exit cycle).
    expect([[...passNodes(g, "n2")], [...passNodes(g, "n6")]]).toEqual([[], []]);
  });

  it("two loops each in the other's body, each with an exit straight back to itself: neither's passes count the other", () => {
    const def = {
      nodes: ["s", "a", "b"].map((id) => ({ id })),
      edges: [
        { from: "s", to: "a" }, { from: "a", to: "b", when: "body" }, { from: "b", to: "a", when: "body" },
        { from: "a", to: "a", when: "exit" }, { from: "b", to: "b", when: "exit" },
      ],
    } as unknown as WorkflowDefinition;
    const g = graphOf(def);
    expect([[...loopBody(g, "a")], [...loopBody(g, "b")]]).toEqual([["b"], ["a"]]);
    expect([[...passNodes(g, "a")], [...passNodes(g, "b")]]).toEqual([[], []]);
  });
});
