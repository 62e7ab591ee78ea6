package scenarios

import (
	"strings"

	"github.com/kpsim/kpsim/sim"
)

// AblationRow names one switch's --ablation runs: the run with it alone,
// and the run that compares it with the series (the series without it,
// for a series switch; the series with it, for an alternative design).
type AblationRow struct {
	Switch string `json:"switch"`
	Alone  string `json:"alone_run"`
	// SeriesRun is "series-S" (Minus) or "series+S" (a design on top of
	// the series), "" when neither exists.
	SeriesRun string `json:"series_run,omitempty"`
	Minus     bool   `json:"series_minus"`
}

// ablationPlan is every switch's ablation runs and the RunSpecs that make
// them, in AblationSpecs' order.
func ablationPlan() ([]AblationRow, []RunSpec) {
	var rows []AblationRow
	var alone, minus, plus []RunSpec
	at := map[sim.Switch]int{}
	for _, s := range sim.AllSwitches() {
		set := s.Closure()
		name := set.Name()
		if len(s.Rules().RequiresAny) > 0 {
			name = s.String() + "+indexes" // every index it can change
		}
		alone = append(alone, RunSpec{Name: name, Switches: set})
		at[s] = len(rows)
		sw := s.String()
		if n := set.Name(); strings.HasPrefix(n, sw+"=") { // a parameterised switch: its value
			sw = n
		}
		rows = append(rows, AblationRow{Switch: sw, Alone: name})
	}
	for _, s := range sim.PresetSeries.Set.List() {
		set := sim.PresetSeries.Set.Without(s)
		for _, d := range s.Dependents().List() {
			set = set.Without(d)
		}
		name := "series-" + s.String()
		minus = append(minus, RunSpec{Name: name, Switches: set})
		rows[at[s]].SeriesRun, rows[at[s]].Minus = name, true
	}
	// The alternative designs alone (above) and on top of the series.
	for _, s := range sim.DesignSwitches() {
		set := sim.PresetSeries.Set.With(s)
		if set.Validate() != nil {
			continue
		}
		plus = append(plus, RunSpec{Name: set.Name(), Switches: set})
		rows[at[s]].SeriesRun = set.Name()
	}
	return rows, append(append(alone, minus...), plus...)
}

// AblationSpecs returns the runs --ablation adds: every switch alone (an
// iterator switch with the kprobe-tree it needs) and, for the series'
// switches, the series minus that switch (minus kprobe-tree drops the
// iterators too); then every alternative design on top of the series.
func AblationSpecs() []RunSpec {
	_, specs := ablationPlan()
	return specs
}

// AblationLine is one switch's summary: its alone run against none and
// its series run against series, by the task's estimated cycles, and
// whether each kept the decisions digest of the run it is compared with
// (a switch changes only what checks cost; a digest that differs is a
// behaviour bug).
type AblationLine struct {
	AblationRow
	AloneTaskCycles int64 `json:"alone_task_est_cycles"`
	// AloneSameDecisions: the alone run's decisions digest equals none's.
	AloneSameDecisions bool  `json:"alone_same_decisions_as_none"`
	SeriesTaskCycles   int64 `json:"series_run_task_est_cycles,omitempty"`
	// SeriesSameDecisions: the series run's digest equals series'.
	SeriesSameDecisions bool `json:"series_run_same_decisions_as_series,omitempty"`
}

// AblationSummary is --ablation's summary: the none and series runs'
// task cycles and one line per switch.
type AblationSummary struct {
	NoneTaskCycles   int64          `json:"none_task_est_cycles"`
	SeriesTaskCycles int64          `json:"series_task_est_cycles"`
	Lines            []AblationLine `json:"switches"`
	// DigestsDiffer counts the runs whose decisions digest differs from
	// the run they are compared with.
	DigestsDiffer int `json:"digests_differ"`
}

// Ablation summarises an --ablation report: nil unless the report has a
// none run, a series run and every switch's alone run.
func Ablation(r *ManyReport) *AblationSummary {
	byName := map[string]*RunResult{}
	for _, run := range r.Runs {
		byName[run.Name] = run
	}
	none, series := byName["none"], byName["series"]
	rows, _ := ablationPlan()
	if none == nil || series == nil {
		return nil
	}
	for _, row := range rows {
		if byName[row.Alone] == nil {
			return nil
		}
	}
	sum := &AblationSummary{NoneTaskCycles: Cycles(none.TaskCycles), SeriesTaskCycles: Cycles(series.TaskCycles)}
	for _, row := range rows {
		alone := byName[row.Alone]
		l := AblationLine{AblationRow: row, AloneTaskCycles: Cycles(alone.TaskCycles), AloneSameDecisions: alone.Digest == none.Digest}
		if !l.AloneSameDecisions {
			sum.DigestsDiffer++
		}
		if sr := byName[row.SeriesRun]; sr != nil {
			l.SeriesTaskCycles, l.SeriesSameDecisions = Cycles(sr.TaskCycles), sr.Digest == series.Digest
			if !l.SeriesSameDecisions {
				sum.DigestsDiffer++
			}
		} else {
			l.SeriesRun, l.Minus = "", false
		}
		sum.Lines = append(sum.Lines, l)
	}
	return sum
}
