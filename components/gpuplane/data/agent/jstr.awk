function jstr(s,   i, c, o) {
	o = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "\\" || c == "\"") o = o "\\" c
		else if (c == "\t") o = o "\\t"
		else if (c == "\n") o = o "\\n"
		else if (c == "\r") o = o "\\r"
		else o = o c
	}
	return "\"" o "\""
}
