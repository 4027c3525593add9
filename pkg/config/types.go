// Package config parses wva's ConfigMaps (the same names and entry formats as
// upstream WVA), validates them, and resolves the configuration in force for
// one variant group into params.Resolved.
package config

import "github.com/wva-project/wva/pkg/decision/params"

// ConfigMap names, shared with upstream WVA so existing installs keep working.
const (
	SaturationConfigMapName    = "wva-saturation-scaling-config"
	QueueingModelConfigMapName = "wva-queueing-model-config"
	ScaleToZeroConfigMapName   = "wva-model-scale-to-zero-config"

	// DefaultKey is the entry that applies to every model without an override.
	DefaultKey = "default"
)

// saturation is what one wva-saturation-scaling-config entry resolves to:
// the scaling settings and the SLO, validated together.
type saturation struct {
	params.Scaling
	SLO params.SLO
}

func defaultSaturation() saturation {
	return saturation{Scaling: params.DefaultScaling(), SLO: params.DefaultSLO()}
}

// scaleToZero and queueingModel carry the validation of their params types.
type (
	scaleToZero   params.ScaleToZero
	queueingModel params.QueueingModel
)

func defaultScaleToZero() scaleToZero     { return scaleToZero(params.DefaultScaleToZero()) }
func defaultQueueingModel() queueingModel { return queueingModel(params.DefaultQueueingModel()) }

// Validate checks a configuration built outside the ConfigMaps (the
// simulator's) as the ConfigMaps' entries are checked.
func Validate(r params.Resolved) error {
	if err := (saturation{Scaling: r.Scaling, SLO: r.SLO}).Validate(); err != nil {
		return err
	}
	if err := scaleToZero(r.ScaleToZero).Validate(); err != nil {
		return err
	}
	if r.QueueingModel != nil {
		return queueingModel(*r.QueueingModel).Validate()
	}
	return nil
}
