package main

import (
	"strings"
	"testing"
)

// TestExplainBoolFlagsBeforeTarget: a boolean image flag, or its --no-
// form, before TARGET takes no value, so TARGET stays the target.
func TestExplainBoolFlagsBeforeTarget(t *testing.T) {
	for _, a := range []string{"--call-padding", "--no-call-padding", "--no-ibt", "--ibt"} {
		if flagTakesValue(a) {
			t.Errorf("%s: taken as a flag with a value", a)
		}
	}
	for _, a := range []string{"--n", "--patches", "--kernel-version"} {
		if !flagTakesValue(a) {
			t.Errorf("%s: taken as a boolean", a)
		}
	}
	args := append([]string{"explain", "--no-call-padding", "--kernel-version", "7.3", "--n", "3"}, smallSizes...)
	out, errOut, code := runKpsim(append(args, "kprobe_many_func_1")...)
	if code != 0 || !strings.Contains(out, "explain kprobe_many_func_1") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if strings.Contains(strings.SplitN(out, "\n", 2)[0], "CALL_PADDING=y") {
		t.Errorf("--no-call-padding: header %q still names CALL_PADDING=y", strings.SplitN(out, "\n", 2)[0])
	}
}
