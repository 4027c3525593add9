package engine

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decide"
)

// TargetKey is a scale target: namespace, kind and name. The API version is
// left out: one Deployment may be named with or without it.
type TargetKey struct{ Namespace, Kind, Name string }

func targetOf(va *llmdv1alpha1.VariantAutoscaling) TargetKey {
	r := va.Spec.ScaleTargetRef
	return TargetKey{Namespace: va.Namespace, Kind: r.Kind, Name: r.Name}
}

// describeVariant names a variant by the object the operator wrote: the VA,
// or the HPA or ScaledObject an in-memory VA was built from.
func describeVariant(va *llmdv1alpha1.VariantAutoscaling) string {
	switch {
	case va.Annotations[llmdv1alpha1.AnnotationFromHPA] != "":
		return "HorizontalPodAutoscaler " + va.Annotations[llmdv1alpha1.AnnotationFromHPA]
	case va.Annotations[llmdv1alpha1.AnnotationFromScaledObject] != "":
		return "ScaledObject " + va.Annotations[llmdv1alpha1.AnnotationFromScaledObject]
	}
	return "VariantAutoscaling " + va.Name
}

// SharedTargets lists the scale targets that more than one variant claims,
// each with its claimants (describeVariant, sorted). Such a target's pods and
// replicas would be counted once per claimant in the model's group, and each
// claimant's scaler would act on the one workload.
func SharedTargets(vas []*llmdv1alpha1.VariantAutoscaling) map[TargetKey][]string {
	claims := map[TargetKey][]string{}
	for _, va := range vas {
		k := targetOf(va)
		claims[k] = append(claims[k], describeVariant(va))
	}
	for k, c := range claims {
		if len(c) < 2 {
			delete(claims, k)
			continue
		}
		slices.Sort(c)
	}
	return claims
}

// holdSharedTargets marks the resolved views whose target another resolved
// view claims as unresolved with ReasonSharedScaleTarget: they join no group
// (nothing is counted twice, the model's other variants decide on sound
// figures), their last decision of record stays in force, as for a target
// not found, and publishUnresolved reports them. It returns how many it held.
func holdSharedTargets(views []decide.View) ([]decide.View, int) {
	var vas []*llmdv1alpha1.VariantAutoscaling
	for _, v := range views {
		if v.Target.Resolved {
			vas = append(vas, v.VA)
		}
	}
	shared := SharedTargets(vas)
	if len(shared) == 0 {
		return views, 0
	}
	out := slices.Clone(views)
	held := 0
	for i, v := range out {
		if !v.Target.Resolved {
			continue
		}
		k := targetOf(v.VA)
		claimants, ok := shared[k]
		if !ok {
			continue
		}
		self := describeVariant(v.VA)
		others := slices.DeleteFunc(slices.Clone(claimants), func(c string) bool { return c == self })
		msg := fmt.Sprintf("%s %s is also scaled by %s: its pods would count twice in model %q, and two scalers would fight over it; "+
			"wva decides for none of them and the last decision stays in force until only one variant targets it",
			k.Kind, k.Name, strings.Join(others, ", "), v.VA.Spec.ModelID)
		out[i].Target = decide.Target{Reason: llmdv1alpha1.ReasonSharedScaleTarget, Message: msg}
		held++
		klog.InfoS("variant held: its scale target is shared", "variant", self, "namespace", v.VA.Namespace,
			"target", k.Kind+"/"+k.Name, "others", others)
	}
	return out, held
}
