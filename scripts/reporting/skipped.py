"""
scripts/reporting/skipped.py — the Skipped section: DIR/skipped.txt's lines, and every
input this report looked for and did not find.
"""


def skipped(d):
    i = d.i
    d.add("## Skipped", "")
    if not i.have_skipped:
        d.para(f"`{i.skipped_file}` is missing (run_all.sh writes one line per skipped or failed step), so "
               "this report cannot say which steps were skipped.")
    elif not i.skipped:
        d.para("nothing was skipped")
    else:
        d.add(*[f"- `{st}`: {rs or 'no reason given'}" for st, rs in i.skipped], "")
    if i.missing_seen:
        seen = list(dict.fromkeys(i.missing_seen))
        d.para("Inputs this report looked for and did not find: " + ", ".join(f"`{m}`" for m in seen) + ".")
