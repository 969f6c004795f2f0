#!/usr/bin/env python3
"""Host simulation of a walking grid's balance under a causal mask (bench/NOTES.md, session 37).

Blocks (132: an H100/H200 at one block an SM) compute item b first, then take items in order
from a counter whenever they finish one (the kernel's err[8] counter). An item of row tile mt
(taken last row tile first, as kReverseM does) computes T - mt key tiles plus a fixed cost c
(in tiles: Q's arrival, the epilogue, the first tile's serial softmax). Printed: the time the
last block ends over the ideal (total work / blocks), for the items in their order (row tiles
innermost), for parallel indices in groups of a fixed G with row tiles outermost inside a
group, and for bench/ab/head_groups.diff's rule: groups of at least two waves of items
(G0 = ceil(2 * blocks / T) parallel indices), as many as fit (P // G0, at least one), their
sizes as even as P allows (they differ by one at most).
"""
import heapq

BLOCKS = 132


def makespan(costs, blocks=BLOCKS):
    ends = [(costs[b], b) for b in range(min(blocks, len(costs)))]
    heapq.heapify(ends)
    nxt, last = len(ends), 0.0
    while ends:
        t, b = heapq.heappop(ends)
        last = max(last, t)
        if nxt < len(costs):
            heapq.heappush(ends, (t + costs[nxt], b))
            nxt += 1
    return last


def grouped(sizes, T, c):
    items = []
    for hg in sizes:
        for mt in range(T):
            items += [T - mt + c] * hg
    return items


def rule_sizes(P, T, blocks=BLOCKS):
    g0 = -(-2 * blocks // T)
    ng = max(1, P // g0)
    q, rem = divmod(P, ng)
    return [q + 1] * rem + [q] * (ng - rem)


def main():
    print("case           c    in order  G=8    G=16   G=32   G=64   rule (group sizes)")
    for P, T, name in [(512, 4, "b32 n512"), (256, 8, "b16 n1K"), (128, 16, "b8 n2K"),
                       (64, 32, "b4 n4K"), (32, 64, "b2 n8K"), (16, 128, "b1 n16K"),
                       (128, 32, "b8 n4K"), (48, 32, "b3 n4K"), (80, 8, "b5 n1K")]:
        for c in (0.5, 1.5):
            in_order = [T - mt + c for _ in range(P) for mt in range(T)]
            ideal = sum(in_order) / BLOCKS
            row = [makespan(in_order) / ideal]
            for G in (8, 16, 32, 64):
                sizes = [min(G, P - g) for g in range(0, P, G)]
                row.append(makespan(grouped(sizes, T, c)) / ideal)
            rs = rule_sizes(P, T)
            row.append(makespan(grouped(rs, T, c)) / ideal)
            print(f"{name:14} {c:3}  " + "  ".join(f"{x:.3f}" for x in row) +
                  f"  ({len(rs)} x {rs[-1]}{'-' + str(rs[0]) if rs[0] != rs[-1] else ''})")


if __name__ == "__main__":
    main()
