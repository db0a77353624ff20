"""The A/B table of this folder: per (order, items, sampler), the median of the
three alternating runs of the build before (base_*) and of huge pages and the
unwritten group column (new_*). Usage: python3 ab_table.py"""
import os, json, glob, statistics as st, sys, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '*_[0-9].json'))):
    v, order, i = f.split('/')[-1][:-5].split('_')
    for r in json.load(open(f))['rows']:
        d[(order, r['items'], r['sampler'], v)].append(r)
def med(rs, k): 
    xs=[r[k] for r in rs if r.get(k) is not None]; return st.median(xs) if xs else float('nan')
print('| order | items | sampler | base us (runs) | new us | new/base | fill M/s base / new | overwrite M/s base / new | RSS MiB base / new | reopen s base / new |')
print('|---|---|---|---|---|---|---|---|---|---|')
for key in sorted({k[:3] for k in d}, key=lambda k:(k[0],k[1],k[2])):
    b=d[key+('base',)]; n=d[key+('new',)]
    if not b or not n: continue
    mb, mn = med(b,'sample128_us'), med(n,'sample128_us')
    runs_b = '/'.join(f"{r['sample128_us']:.1f}" for r in b); runs_n='/'.join(f"{r['sample128_us']:.1f}" for r in n)
    print(f"| {key[0]} | {key[1]:,} | {key[2]} | {mb:.1f} ({runs_b}) | {mn:.1f} ({runs_n}) | {mn/mb:.2f} | {med(b,'insert_items_per_s')/1e6:.1f} / {med(n,'insert_items_per_s')/1e6:.1f} | {med(b,'insert_overwrite_per_s')/1e6:.1f} / {med(n,'insert_overwrite_per_s')/1e6:.1f} | {med(b,'rss_mb'):.0f} / {med(n,'rss_mb'):.0f} | {med(b,'reopen_s'):.2f} / {med(n,'reopen_s'):.2f} |")
