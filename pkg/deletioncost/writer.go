package deletioncost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Writer sets the annotation through the API server (RBAC: pods patch).
// It reads the current value from the informer cache and patches only the
// pods whose cost changed, so a scale-down decided for several cycles in a
// row (the HPA's stabilization window) writes nothing after the first.
type Writer struct {
	Client kubernetes.Interface
	// Pods must keep the annotation (inventory.PodTransform does).
	Pods corelisters.PodLister
}

// WriteCosts sets each pod's cost in namespace; a nil cost removes the
// annotation. Pods gone from the cache or the API server are skipped. It
// returns how many pods it patched and every failure.
func (w Writer) WriteCosts(ctx context.Context, namespace string, costs map[string]*int32) (int, error) {
	names := make([]string, 0, len(costs))
	for name := range costs {
		names = append(names, name)
	}
	sort.Strings(names)
	patched := 0
	var errs []error
	for _, name := range names {
		cost := costs[name]
		pod, err := w.Pods.Pods(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		current, has := pod.Annotations[Annotation]
		want := ""
		if cost != nil {
			want = strconv.FormatInt(int64(*cost), 10)
		}
		if (cost == nil && !has) || (cost != nil && has && current == want) {
			continue
		}
		var value any // JSON null removes the key (merge patch)
		if cost != nil {
			value = want
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{Annotation: value}}})
		if err != nil {
			return patched, err
		}
		_, err = w.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "wva-adapter"})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", namespace, name, err))
		default:
			patched++
		}
	}
	return patched, errors.Join(errs...)
}
