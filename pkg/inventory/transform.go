package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The adapter's informers cache every pod, Deployment and StatefulSet it
// watches (the whole cluster by default), and the inventory reads a few
// fields of each. These transforms (cache.TransformFunc, set with
// SetTransform) keep only those fields: managedFields, annotations (but a
// pod's deletion cost), env, volumes, resources and most of the status are
// dropped before caching.
// Keep them in step with ResolveTarget, Resolve, StartupDelay,
// EngineArgs and StartupAllowance: TestTransformsKeepWhatTheInventoryReads
// fails otherwise.

// meta keeps the identity the informer and listers need.
func meta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}

// PodTransform keeps a pod's labels (selectors), deletion and creation
// times, phase and Ready condition, and of its annotations only the
// pod-deletion-cost (the engine patches it only when it changed).
func PodTransform(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: meta(p.ObjectMeta), Status: corev1.PodStatus{Phase: p.Status.Phase}}
	out.Labels, out.DeletionTimestamp, out.CreationTimestamp = p.Labels, p.DeletionTimestamp, p.CreationTimestamp
	if c, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		out.Annotations = map[string]string{corev1.PodDeletionCost: c}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out, nil
}

// DeploymentTransform keeps replicas, ready replicas, selector and the
// template's labels (the role), engine args, startup probes and node
// selector.
func DeploymentTransform(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	return &appsv1.Deployment{ObjectMeta: meta(d.ObjectMeta), Spec: appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector,
		Template: podTemplate(&d.Spec.Template)}, Status: appsv1.DeploymentStatus{ReadyReplicas: d.Status.ReadyReplicas}}, nil
}

// StatefulSetTransform is DeploymentTransform for StatefulSets.
func StatefulSetTransform(obj any) (any, error) {
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.StatefulSet{ObjectMeta: meta(s.ObjectMeta), Spec: appsv1.StatefulSetSpec{Replicas: s.Spec.Replicas, Selector: s.Spec.Selector,
		Template: podTemplate(&s.Spec.Template)}, Status: appsv1.StatefulSetStatus{ReadyReplicas: s.Status.ReadyReplicas}}, nil
}

func podTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Labels}, Spec: podSpec(&t.Spec)}
}

func podSpec(s *corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{NodeSelector: s.NodeSelector, Containers: make([]corev1.Container, 0, len(s.Containers))}
	for _, c := range s.Containers {
		out.Containers = append(out.Containers, corev1.Container{Name: c.Name, Command: c.Command, Args: c.Args, StartupProbe: startupProbe(c.StartupProbe)})
	}
	return out
}

// startupProbe keeps the timing StartupAllowance reads, not the handler.
func startupProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	return &corev1.Probe{InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds, FailureThreshold: p.FailureThreshold}
}
