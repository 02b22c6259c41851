package main

import (
	"math"
	"sort"
	"time"
)

// Stat is min/median/max of repeated samples of one figure.
type Stat struct {
	Samples []float64 `json:"samples"`
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
}

func newStat(samples []float64) *Stat {
	if len(samples) == 0 {
		return nil
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &Stat{Samples: samples, Min: s[0], Median: med, Max: s[len(s)-1]}
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// speed is how many times faster a is than b for the figure's direction:
// for throughput a/b, for time or latency b/a. Above 1 means a is faster.
func speed(a, b *Stat, higherBetter bool) float64 {
	if a == nil || b == nil || a.Median == 0 || b.Median == 0 {
		return math.NaN()
	}
	if higherBetter {
		return a.Median / b.Median
	}
	return b.Median / a.Median
}
