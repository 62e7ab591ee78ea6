package main

import "io"

const reportUsage = "kpsim report many --out FILE.html|FILE.md [--n N | --n START:STOP:STEP] [run many flags]"

func runReport(args []string, stdout, stderr io.Writer) error { return usagef("not yet") }
