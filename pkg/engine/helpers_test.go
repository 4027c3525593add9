package engine

import (
	"github.com/wva-project/wva/pkg/decision"
	"github.com/wva-project/wva/pkg/enforcer"
	"github.com/wva-project/wva/pkg/pipeline"
)

func pipelineInput(m enforcer.MetricsState) pipeline.GroupInput {
	return pipeline.GroupInput{Metrics: m, Group: decision.Group{ModelID: "m", Namespace: "prod"}}
}

func resultWith(replicas int32, reason string) pipeline.GroupResult {
	return pipeline.GroupResult{Analyzer: "saturation-percentage", Targets: []decision.Target{{Variant: "a", Replicas: replicas, Reason: reason, Action: decision.ActionNone, Rule: decision.RuleSteady}}}
}
