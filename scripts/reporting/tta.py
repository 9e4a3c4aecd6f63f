"""
scripts/reporting/tta.py — the Time to accuracy section: DIR/tta.csv (bench/tta-sweep.sh,
run_all.sh's step tta; docs/tta.md) as its figure, a table per global batch (median
[min-max] over the seeds that reached the target) and sentences computed from it: the
batch at which seconds-to-target stops falling (scripts/tta_sweep.py stops_falling),
whether epochs-to-target grows with the batch, and whether the data-parallel strategy
needed serial's epochs, as its maths says it should.
"""

import tta_sweep as T


def tta(d):
    i = d.i
    d.add("## Time to accuracy", "")
    try:
        diverged = T.read_diverged(i.path("tta-diverged.txt"))
    except (ValueError, OSError) as e:
        d.para(f"(runs that diverged not counted: {e})")
        diverged = []
    rows = i.rows("tta.csv")
    if rows is None and not diverged:
        d.para(i.missing("tta.csv"))
        return
    if not rows:
        d.para(f"not measured in this run: no rows in {i.path('tta.csv')}"
               + (f"; {len(diverged)} run(s) diverged (tta-diverged.txt)" if diverged else ""))
        return
    s = T.summary(rows, diverged)
    first = rows[0]
    target = T.P.num(first["target_accuracy"])
    best_line = (i.text("tta-best.txt") or "").strip().split("\t")
    label = next((x["best"]["label"] for x in s.values() if "best" in x), None)
    why = best_line[1] if len(best_line) >= 2 else "tta-best.txt missing: the reason was not recorded"
    cap = best_line[2] if len(best_line) >= 3 else max(int(r["epochs"]) for r in rows)
    seeds = sorted({r["seed"] for r in rows}, key=int)
    d.para(f"Every run stops at the end of the first epoch whose test accuracy reaches {target:g} % "
           f"({first['dataset']}, {int(first['train_n']):,} training samples; at most {cap} epochs, "
           f"seeds {', '.join(seeds)}). The learning rate is scaled linearly with the global batch and warmed up "
           f"(`{first['lr_schedule']}`, --lr {first['lr']}; Goyal et al. 2017; docs/tta.md says why these values). "
           f"Beside serial: {label or 'no strategy rows'} — {why}.")
    d.add(i.figure("tta.png", "time to accuracy: epochs and seconds to the target vs global batch, "
                              "per-epoch speedup beside"), "")
    body = []
    for b in sorted(s):
        ser, bst = s[b].get("serial"), s[b].get("best")
        lr = next(iter(s[b].values()))["lr"]
        body.append([f"{b:,}", f"{lr:.3g}", cell(ser, "epochs"), cell(ser, "seconds"), cell(bst, "epochs"),
                     cell(bst, "seconds"), " / ".join(f"{x['reached']}/{x['runs']}" if x else "–" for x in (ser, bst))])
    d.table(["batch", "lr", "serial epochs", "serial s to target", f"{label or 'best'} epochs",
             f"{label or 'best'} s to target", "reached (serial / best)"], body)
    d.para("Median [min–max] over the seeds that reached the target; \"not reached\" when none did within the cap, "
           "\"diverged\" when every run's loss did. Rows: tta.csv (the trainers' schema); runs that diverged: "
           "tta-diverged.txt.")
    d.shows(findings(rows, s, label, diverged))


def cell(x, key):
    if not x:
        return "–"
    if not x["reached"]:
        if x["diverged"] and not x["rows"]:
            return f"diverged (epoch {', '.join(sorted({v['epoch'] for v in x['diverged']}, key=int))})"
        return f"not reached ({x['cap']} epochs)"
    med, lo, hi = x[key]
    fmt = "{:g}" if key == "epochs" else "{:.1f}"
    text = fmt.format(med)
    return text if lo == hi else f"{text} [{fmt.format(lo)}–{fmt.format(hi)}]"


def findings(rows, s, label, diverged):
    out = []
    if diverged:
        out.append(f"{len(diverged)} run(s) diverged (loss not finite: the scaled rate too large for the batch; "
                   f"no row, counted as not reached): batch {', '.join(sorted({v['batch'] for v in diverged}, key=int))}.")
    for side, name in (("serial", "serial"), ("best", label)):
        pts = [(b, s[b][side]["seconds"][0] if side in s[b] and s[b][side]["reached"] else None) for b in s]
        stop = T.stops_falling(pts)
        if stop is None:
            if any(side in s[b] for b in s):
                out.append(f"For {name}, no batch reached the target.")
            continue
        b, b_min, s_min = stop
        out.append(f"For {name}, seconds to target stop falling at batch {b:,} (the smallest batch within "
                   f"{T.WITHIN:.0%} of its minimum, {s_min:.1f} s at batch {b_min:,}).")
        never = [b_ for b_, v in pts if v is None and side in s[b_]]
        if never:
            out.append(f"No {name} seed reached it at batch {', '.join(f'{x:,}' for x in never)}.")
    ep = [(b, s[b]["serial"]["epochs"][0] if "serial" in s[b] and s[b]["serial"]["reached"] else None) for b in s]
    g = T.grows(ep)
    reached = [(b, e) for b, e in sorted(ep) if e is not None]
    if g:
        out.append(f"Epochs to target {'grow' if g == 'yes' else 'do not grow' if g == 'no' else 'are not monotonic'} "
                   f"with the batch (serial: {reached[0][1]:g} at {reached[0][0]:,}, {reached[-1][1]:g} at "
                   f"{reached[-1][0]:,}).")
    same, pairs = T.same_epochs(rows, diverged)
    if pairs:
        out.append(f"The data-parallel {label} needed serial's epochs to target in {same} of {pairs} (batch, seed) pairs"
                   + (", as its equal maths says." if same == pairs else
                      ": not everywhere equal (float sums in another order can tip an epoch across the target)."))
    return out

