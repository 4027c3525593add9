// Package report renders a simulation's report: the text table and chart,
// the self-contained HTML page with its SVG charts, and the frontier
// ranking the benchmark tables quote.
package report
