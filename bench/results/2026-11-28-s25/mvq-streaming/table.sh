# table LOG: one line per product, us per variant (device-kernel-sweep.sh's raw log).
table() {
  python3 - "$1" <<'PY'
import re, sys, collections
cur = None; t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+)", line)
    if m: cur = m.group(1); continue
    m = re.match(r"(BM_\S+?)/iterations.*us=([0-9.]+)", line)
    if m: t[(m.group(1), cur)].append(float(m.group(2)))
for n in sorted({k[0] for k in t}):
    print(n, " ".join("%s=%s" % (v, t[(n, v)][0]) for v in dict.fromkeys(k[1] for k in t if k[0] == n)))
PY
}
