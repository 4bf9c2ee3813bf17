package report

import (
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

// Summary is every statistic the report's tables and findings show, as
// numbers for scripts and CI jobs (doxlab report --json).
type Summary struct {
	Runs     []string          `json:"runs"`
	Counts   map[string]Count  `json:"counts"` // per experiment
	Links    LinkSummary       `json:"links"`
	Cells    []experiment.Cell `json:"cells"`
	Findings []FindingSummary  `json:"findings"`
}

// Count is how much of what an experiment's runs hold: 180 "samples".
type Count struct {
	N    int    `json:"n"`
	Unit string `json:"unit"`
}

// LinkSummary is what the link checks of the runs say.
type LinkSummary struct {
	Checks int      `json:"checks"`
	Failed []string `json:"failed"`
	// Again are the runs measured again after a failed check, left out.
	Again []store.Supersession `json:"measured_again"`
}

// FindingSummary is a finding with its verdict as earned.
type FindingSummary struct {
	Experiment string   `json:"experiment"`
	Claim      string   `json:"claim"`
	Source     string   `json:"source"`
	Paper      string   `json:"paper"`
	Here       string   `json:"here"`
	Verdict    string   `json:"verdict"`
	Reason     string   `json:"reason,omitempty"` // why inconclusive
	Test       string   `json:"test"`             // what the verdict applies
	N          int      `json:"n"`                // the fewest samples in a cell behind it
	P          *float64 `json:"p,omitempty"`      // of a claimed difference
}

// Summarize is in's statistics and findings, the verdicts earned as the
// HTML report earns them.
func Summarize(in Input) Summary {
	ev := experiment.EvidenceOf(in.Links)
	s := Summary{Runs: []string{}, Counts: map[string]Count{}, Links: LinkSummary{Checks: len(in.Links), Failed: ev.FailedChecks}, Cells: []experiment.Cell{}, Findings: []FindingSummary{}}
	if s.Links.Failed == nil {
		s.Links.Failed = []string{}
	}
	s.Links.Again = append([]store.Supersession{}, in.Again...)
	for _, r := range in.Runs {
		s.Runs = append(s.Runs, r.ID)
	}
	for _, r := range in.Results {
		n, unit := r.Count()
		s.Counts[r.Experiment] = Count{n, unit}
		if n == 0 {
			continue
		}
		if t, ok := r.Results.(experiment.Tabler); ok {
			for _, c := range t.Cells() {
				c.Experiment = r.Experiment
				s.Cells = append(s.Cells, c)
			}
		}
		if f, ok := r.Results.(experiment.Finder); ok {
			for _, x := range experiment.Earn(f.Findings(), in.evidence(r.Experiment)) {
				fs := FindingSummary{Experiment: r.Experiment, Claim: x.Claim, Source: x.Source, Paper: x.Paper, Here: x.Here,
					Verdict: string(x.Verdict), Reason: x.Reason, Test: x.Why, N: x.N}
				if x.Test != nil {
					fs.P = experiment.Num(x.Test.P)
				}
				s.Findings = append(s.Findings, fs)
			}
		}
	}
	return s
}
