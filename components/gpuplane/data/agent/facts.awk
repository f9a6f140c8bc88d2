function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function unq(s,   q, o, i, c) {
	s = trim(s)
	q = substr(s, 1, 1)
	if (length(s) >= 2 && q == "\047" && substr(s, length(s), 1) == q)
		return substr(s, 2, length(s) - 2)
	if (length(s) >= 2 && q == "\"" && substr(s, length(s), 1) == q) {
		s = substr(s, 2, length(s) - 2)
		o = ""
		for (i = 1; i <= length(s); i++) {
			c = substr(s, i, 1)
			if (c == "\\" && i < length(s)) {
				i++
				c = substr(s, i, 1)
				if (c == "n") c = "\n"
				else if (c == "t") c = "\t"
			}
			o = o c
		}
		return o
	}
	return s
}
function splitkey(s, parts,   n, i, c, cur, q) {
	n = 0; cur = ""; q = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (q != "") {
			cur = cur c
			if (c == q) q = ""
			else if (c == "\\" && q == "\"") { i++; cur = cur substr(s, i, 1) }
			continue
		}
		if (c == "\"" || c == "\047") { q = c; cur = cur c; continue }
		if (c == ".") { parts[++n] = unq(cur); cur = ""; continue }
		cur = cur c
	}
	parts[++n] = unq(cur)
	return n
}
function runtime(name) {
	if (!(name in seen)) { seen[name] = 1; names[++nrt] = name }
}
/^[ \t]*\[\[/ { sect = ""; next }
/^[ \t]*\[/ {
	h = trim($0)
	h = substr(h, 2, length(h) - 2)
	n = splitkey(h, p)
	sect = ""
	if (n >= 2 && p[1] == "plugins" && \
	    (p[2] == "io.containerd.grpc.v1.cri" || p[2] == "io.containerd.cri.v1.runtime")) {
		if (n == 2) sect = "cri"
		else if (n == 3 && p[3] == "containerd") sect = "ctd"
		else if (n >= 5 && p[3] == "containerd" && p[4] == "runtimes") {
			name = p[5]
			runtime(name)
			if (n == 5) sect = "rt"
			else if (n == 6 && p[6] == "options") sect = "opt"
		}
	}
	next
}
/=/ {
	if (sect == "") next
	k = $0; sub(/=.*/, "", k); k = unq(k)
	v = $0; sub(/^[^=]*=/, "", v); v = trim(v)
	if (sect == "cri" && k == "enable_cdi") cdi = v
	else if (sect == "ctd" && k == "default_runtime_name") def = unq(v)
	else if (sect == "rt" && k == "runtime_type") rtype[name] = unq(v)
	else if (sect == "opt" && k == "BinaryName") rbin[name] = unq(v)
	else if (sect == "opt" && k == "SystemdCgroup") rsys[name] = v
}
END {
	printf "default\t%s\n", def
	if (cdi != "") printf "cdi\t%s\n", cdi
	for (i = 1; i <= nrt; i++) {
		n = names[i]
		printf "runtime\t%s\t%s\t%s\t%s\n", n, rtype[n], rbin[n], rsys[n]
	}
}
