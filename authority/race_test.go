//go:build race

package authority

const raceEnabled = true
