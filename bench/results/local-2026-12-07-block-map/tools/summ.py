import json, sys, glob, statistics, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    b = f.split('/')[-1].rsplit('-r', 1)[0]
    for r in json.load(open(f)):
        if r['loader'] != 'gpufeed': continue
        cpu = r['worker_read_cpu_seconds'] / r['records'] * 1e9
        d[(b, r['record_bytes'], r['order'])].append((r['records_per_s'], cpu))
rows = sorted(d)
print('%-10s %6s %-15s %4s %14s %14s %16s' % ('build', 'size', 'order', 'n', 'rec/s median', 'range', 'worker CPU ns/rec'))
for k in rows:
    v = d[k]
    rs = [x[0] for x in v]; cs = [x[1] for x in v]
    print('%-10s %6d %-15s %4d %14.0f %7.0f-%-7.0f %10.0f' % (k[0], k[1], k[2], len(v), statistics.median(rs), min(rs), max(rs), statistics.median(cs)))
