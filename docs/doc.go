// Package docs holds kpsim's documentation for the people who carry it
// on: model.md (kernel function → Go function → counters → switch),
// cost-model.md (every weight and its source), adding-a-switch.md,
// series.md (the series the switches model) and architecture.md. Its
// tests regenerate the tables in them from the code and fail when the
// files are stale (KPSIM_UPDATE_DOCS=1 go test ./docs rewrites them).
package docs
