package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	llmdlisters "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// fieldManager names the controller's writes in managedFields.
const fieldManager = "wva-controller"

// Controller reconciles VAs into HPAs or KEDA ScaledObjects.
type Controller struct {
	Kube       kubernetes.Interface
	WVA        versioned.Interface
	VAs        llmdlisters.VariantAutoscalingLister
	HPAs       autoscalinglisters.HorizontalPodAutoscalerLister
	Scales     scale.ScalesGetter
	Mapper     meta.RESTMapper
	Recorder   record.EventRecorder
	Clock      clock.PassiveClock
	Caps       Capabilities
	StaleAfter time.Duration

	// Output is what the controller keeps per VA: an HPA (default) or a
	// KEDA ScaledObject, whose trigger reads KedaScaler.
	Output        Output
	Dynamic       dynamic.Interface
	ScaledObjects cache.GenericLister
	KedaScaler    KedaScaler

	queue workqueue.TypedRateLimitingInterface[string]
}

// NewQueue creates the work queue; call before wiring event handlers.
func (c *Controller) NewQueue() {
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "wva-controller"})
}

// Handlers returns the VA event handler and the one for the objects kept
// per VA (HPAs, ScaledObjects); both feed the queue.
func (c *Controller) Handlers() (va, owned cache.ResourceEventHandler) {
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	// An HPA or ScaledObject event goes to the VA it belongs to (drift
	// repair, deletion).
	enqueueOwner := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			c.enqueueFor(o)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue},
		cache.ResourceEventHandlerFuncs{AddFunc: enqueueOwner, UpdateFunc: func(_, n any) { enqueueOwner(n) }, DeleteFunc: enqueueOwner}
}

// enqueueFor queues the VA an HPA or ScaledObject belongs to, or the VAs
// it may conflict with: the one of the same name, those on its target.
func (c *Controller) enqueueFor(obj metav1.Object) {
	if name := obj.GetLabels()[llmdv1alpha1.LabelVariantAutoscaling]; name != "" {
		c.queue.Add(obj.GetNamespace() + "/" + name)
		return
	}
	if _, err := c.VAs.VariantAutoscalings(obj.GetNamespace()).Get(obj.GetName()); err == nil {
		c.queue.Add(obj.GetNamespace() + "/" + obj.GetName())
	}
	// Someone else's scaler on a VA's target: that VA reports the conflict
	// now (or creates its own once the scaler is gone), not at its resync.
	kind, name, ok := scaleTargetOf(obj)
	if !ok {
		return
	}
	vas, err := c.VAs.VariantAutoscalings(obj.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, va := range vas {
		if va.Name != obj.GetName() && va.Spec.ScaleTargetRef.Kind == kind && va.Spec.ScaleTargetRef.Name == name {
			c.queue.Add(va.Namespace + "/" + va.Name)
		}
	}
}

// Run processes the queue with workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.Reconcile(ctx, key); err != nil {
		klog.ErrorS(err, "reconcile failed; retrying", "va", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// Reconcile aligns the HPA of one VA, scales the target directly where the
// HPA cannot, and reports in VA status.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	va, err := c.VAs.VariantAutoscalings(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the HPA goes with it (owner reference, garbage collector)
	}
	if err != nil {
		return err
	}
	st := status{ready: true}
	var behaviorErr error
	if c.Output == OutputScaledObject {
		st.reason, st.msg = llmdv1alpha1.ReasonScaledObjectSynced, "ScaledObject "+name+" matches the VA"
		var desired *unstructured.Unstructured
		desired, behaviorErr = DesiredScaledObject(va, c.KedaScaler)
		if desired == nil {
			return behaviorErr
		}
		err = errors.Join(c.removeOwnHPA(ctx, va), c.syncScaledObject(ctx, va, desired, &st))
	} else {
		st.reason, st.msg = llmdv1alpha1.ReasonHPASynced, "HPA "+name+" matches the VA"
		var desired *autoscalingv2.HorizontalPodAutoscaler
		desired, behaviorErr = DesiredHPA(va, c.Caps)
		err = c.syncHPA(ctx, va, desired, &st)
	}
	if behaviorErr != nil {
		c.Recorder.Event(va, corev1.EventTypeWarning, llmdv1alpha1.ReasonInvalidHPABehavior, behaviorErr.Error())
	}
	if err != nil {
		return errors.Join(err, c.writeStatus(ctx, va, st, false))
	}
	if behaviorErr != nil && st.ready {
		st.reason, st.msg = llmdv1alpha1.ReasonInvalidHPABehavior, behaviorErr.Error()
	}
	applied, err := c.actuate(ctx, va)
	if err != nil {
		return errors.Join(err, c.writeStatus(ctx, va, st, false))
	}
	return c.writeStatus(ctx, va, st, st.ready && applied)
}

type status struct {
	ready  bool
	reason string
	msg    string
}

// kept describes one kind of object the controller keeps per VA (an HPA
// or a KEDA ScaledObject): syncKept is the same for both apart from these.
type kept[T metav1.Object] struct {
	kind     string // for events and messages
	conflict string // HPAReady condition reason
	get      func(namespace, name string) (T, error)
	// competing finds another object already scaling the VA's target,
	// from the cache or, fromAPI, from the API server.
	competing func(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, fromAPI bool) (*competitor, error)
	create    func(ctx context.Context, obj T) error
	update    func(ctx context.Context, obj T) error
	delete    func(ctx context.Context, obj T) error
	inSync    func(live, desired T) bool
	apply     func(live, desired T) T
}

// syncKept creates or repairs the VA's object, or reports a conflict in st.
// Competing scalers are looked for on every reconcile, whichever came
// first: before a create from the API (the cache may not yet hold a scaler
// made a moment before the VA), afterwards from the cache (a scaler made
// after wva's object). Of two scalers the older stays: wva deletes its own
// only when it was made second.
func syncKept[T metav1.Object](ctx context.Context, c *Controller, va *llmdv1alpha1.VariantAutoscaling, k kept[T], desired T, bounds string, st *status) error {
	target := va.Spec.ScaleTargetRef.Kind + " " + va.Spec.ScaleTargetRef.Name
	live, err := k.get(va.Namespace, va.Name)
	switch {
	case apierrors.IsNotFound(err):
		other, err := k.competing(ctx, va, true)
		if err != nil {
			return err
		}
		if other != nil {
			c.reportConflict(va, k.conflict, st, fmt.Sprintf("%s already scales %s; wva does not create a second %s", other.what, target, k.kind))
			return nil
		}
		if err := k.create(ctx, desired); err != nil {
			return fmt.Errorf("create %s %s/%s: %w", k.kind, va.Namespace, va.Name, err)
		}
		c.Recorder.Eventf(va, corev1.EventTypeNormal, k.kind+"Created", "created %s %s %s on wva_desired_replicas", k.kind, va.Name, bounds)
		return nil
	case err != nil:
		return err
	case ownedBy(live, va.UID):
		other, err := k.competing(ctx, va, false)
		if err != nil {
			return err
		}
		if other != nil && other.olderThan(live) {
			if err := k.delete(ctx, live); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s/%s made after %s: %w", k.kind, va.Namespace, va.Name, other.what, err)
			}
			c.Recorder.Eventf(va, corev1.EventTypeWarning, k.kind+"Deleted", "deleted %s %s: %s scaled %s first", k.kind, va.Name, other.what, target)
			c.reportConflict(va, k.conflict, st, fmt.Sprintf("%s already scales %s; wva deleted its %s %s, made after it", other.what, target, k.kind, va.Name))
			return nil
		}
		if other != nil {
			c.reportConflict(va, k.conflict, st, fmt.Sprintf("%s also scales %s, made after wva's %s %s; two scalers on one target fight, remove %s",
				other.what, target, k.kind, va.Name, other.what))
			return nil
		}
		if k.inSync(live, desired) {
			return nil
		}
		if err := k.update(ctx, k.apply(live, desired)); err != nil {
			return fmt.Errorf("update %s %s/%s: %w", k.kind, va.Namespace, va.Name, err)
		}
		c.Recorder.Eventf(va, corev1.EventTypeNormal, k.kind+"Updated", "%s %s realigned with the VA %s", k.kind, va.Name, bounds)
		return nil
	case va.Annotations[llmdv1alpha1.AnnotationAdoptHPA] == "true":
		if err := k.update(ctx, k.apply(live, desired)); err != nil {
			return fmt.Errorf("adopt %s %s/%s: %w", k.kind, va.Namespace, va.Name, err)
		}
		c.Recorder.Eventf(va, corev1.EventTypeNormal, k.kind+"Adopted", "adopted existing %s %s (%s=true)", k.kind, va.Name, llmdv1alpha1.AnnotationAdoptHPA)
		return nil
	default:
		c.reportConflict(va, k.conflict, st, fmt.Sprintf("%s %s exists and is not managed by wva; set annotation %s=\"true\" on the VA to adopt it",
			k.kind, va.Name, llmdv1alpha1.AnnotationAdoptHPA))
		return nil
	}
}

// reportConflict sets HPAReady=False with reason in st, with a Warning
// Event when the VA does not already report that reason.
func (c *Controller) reportConflict(va *llmdv1alpha1.VariantAutoscaling, reason string, st *status, msg string) {
	st.ready, st.reason, st.msg = false, reason, msg
	if !conditionIs(va, llmdv1alpha1.ConditionTypeHPAReady, reason) {
		c.Recorder.Event(va, corev1.EventTypeWarning, reason, msg)
	}
}

func (c *Controller) syncHPA(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, desired *autoscalingv2.HorizontalPodAutoscaler, st *status) error {
	hpas := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(va.Namespace)
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	return syncKept(ctx, c, va, kept[*autoscalingv2.HorizontalPodAutoscaler]{
		kind: "HPA", conflict: llmdv1alpha1.ReasonHPAConflict,
		get: func(ns, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
			return c.HPAs.HorizontalPodAutoscalers(ns).Get(name)
		},
		competing: c.competingScalerOfHPA,
		create: func(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler) error {
			_, err := hpas.Create(ctx, h, opts)
			return err
		},
		delete: func(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler) error {
			return hpas.Delete(ctx, h.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &h.UID}})
		},
		update: func(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler) error {
			_, err := hpas.Update(ctx, h, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		inSync: InSync, apply: Apply,
	}, desired, fmt.Sprintf("(min %d, max %d)", *desired.Spec.MinReplicas, desired.Spec.MaxReplicas), st)
}

// actuate scales the target itself where the HPA cannot and reports whether
// the target runs the decided replica count.
func (c *Controller) actuate(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling) (bool, error) {
	gr, err := c.targetResource(va)
	if err != nil {
		return false, nil // reported by the adapter's TargetResolved
	}
	s, err := c.Scales.Scales(va.Namespace).Get(ctx, gr, va.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get scale of %s %s: %w", va.Spec.ScaleTargetRef.Kind, va.Spec.ScaleTargetRef.Name, err)
	}
	plan, ok := PlanDirectScaleFor(c.Output, va, c.Caps, s.Spec.Replicas, c.Clock.Now(), c.StaleAfter)
	if ok && plan.Replicas == 0 {
		// The cached VA may predate a wake whose replica the GET above
		// already shows; the fast path writes its marker before it scales,
		// so a VA read now has it. The update below is conditional on the
		// scale's resourceVersion, so a wake after the GET fails it.
		fresh, err := c.WVA.LlmdV1alpha1().VariantAutoscalings(va.Namespace).Get(ctx, va.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("re-read VariantAutoscaling before scaling to 0: %w", err)
		}
		va = fresh
		plan, ok = PlanDirectScaleFor(c.Output, va, c.Caps, s.Spec.Replicas, c.Clock.Now(), c.StaleAfter)
	}
	if ok {
		from := s.Spec.Replicas
		s.Spec.Replicas = plan.Replicas
		if _, err := c.Scales.Scales(va.Namespace).Update(ctx, gr, s, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return false, fmt.Errorf("scale %s %s to %d: %w", va.Spec.ScaleTargetRef.Kind, va.Spec.ScaleTargetRef.Name, plan.Replicas, err)
		}
		c.Recorder.Eventf(va, corev1.EventTypeNormal, "ScaledTarget", "scaled %s %s %d -> %d: %s",
			va.Spec.ScaleTargetRef.Kind, va.Spec.ScaleTargetRef.Name, from, plan.Replicas, plan.Reason)
		klog.InfoS("scaled target directly", "va", klog.KObj(va), "from", from, "to", plan.Replicas, "reason", plan.Reason)
	}
	decided := va.Status.DesiredOptimizedAlloc
	return !decided.LastRunTime.IsZero() && s.Spec.Replicas == decided.NumReplicas, nil
}

func (c *Controller) targetResource(va *llmdv1alpha1.VariantAutoscaling) (schema.GroupResource, error) {
	gvk, err := va.Spec.ScaleTargetRef.GroupVersionKind()
	if err != nil {
		return schema.GroupResource{}, err
	}
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupResource{}, err
	}
	return m.Resource.GroupResource(), nil
}

// writeStatus sets the controller-owned status fields (actuation.applied,
// HPAReady) when they change, retrying conflicts on a fresh copy.
func (c *Controller) writeStatus(ctx context.Context, va *llmdv1alpha1.VariantAutoscaling, st status, applied bool) error {
	cond := metav1.Condition{Type: llmdv1alpha1.ConditionTypeHPAReady, Status: metav1.ConditionTrue, Reason: st.reason,
		Message: st.msg, ObservedGeneration: va.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())}
	if !st.ready {
		cond.Status = metav1.ConditionFalse
	}
	current := va.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next := current.DeepCopy()
		changed := meta.SetStatusCondition(&next.Status.Conditions, cond)
		if next.Status.Actuation.Applied != applied {
			next.Status.Actuation.Applied, changed = applied, true
		}
		if !changed {
			return nil
		}
		_, err := c.WVA.LlmdV1alpha1().VariantAutoscalings(va.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: fieldManager})
		if apierrors.IsConflict(err) {
			if latest, gerr := c.WVA.LlmdV1alpha1().VariantAutoscalings(va.Namespace).Get(ctx, va.Name, metav1.GetOptions{}); gerr == nil {
				current = latest
			}
		}
		return err
	})
}

func conditionIs(va *llmdv1alpha1.VariantAutoscaling, condType, reason string) bool {
	c := meta.FindStatusCondition(va.Status.Conditions, condType)
	return c != nil && c.Reason == reason
}
