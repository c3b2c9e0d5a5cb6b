//go:build !race

package claude

const raceEnabled = false
