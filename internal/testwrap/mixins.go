package testwrap

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The methods below are shared by the wrappers through embedding: W is the wrapper type each
// method returns, so that a chain keeps its type (MakeSandbox(...).Label(...).Replicas(0)). A
// wrapper binds them to its object's fields when it is made.

// RuntimeImage is the image of RuntimeContainer. The integration tests have no kubelet, so
// nothing pulls it.
const RuntimeImage = "sandbox-runtime:test"

// RuntimeContainer is the container every Make* with a pod template starts with: "runtime",
// running RuntimeImage as `sleep infinity`, with the sandboxd port 8888 named http.
func RuntimeContainer() corev1.Container {
	return corev1.Container{
		Name:    "runtime",
		Image:   RuntimeImage,
		Command: []string{"sleep", "infinity"},
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}},
	}
}

// objectMeta sets the object's own metadata.
type objectMeta[W any] struct {
	self W
	m    *metav1.ObjectMeta
}

// Label sets one label on the object.
func (o objectMeta[W]) Label(key, value string) W {
	o.m.Labels = with(o.m.Labels, key, value)
	return o.self
}

// Labels adds labels to the object (keeping the ones already set).
func (o objectMeta[W]) Labels(kv map[string]string) W {
	for k, v := range kv {
		o.m.Labels = with(o.m.Labels, k, v)
	}
	return o.self
}

// Annotation sets one annotation on the object.
func (o objectMeta[W]) Annotation(key, value string) W {
	o.m.Annotations = with(o.m.Annotations, key, value)
	return o.self
}

// Annotations adds annotations to the object (keeping the ones already set).
func (o objectMeta[W]) Annotations(kv map[string]string) W {
	for k, v := range kv {
		o.m.Annotations = with(o.m.Annotations, k, v)
	}
	return o.self
}

// GenerateName sets metadata.generateName.
func (o objectMeta[W]) GenerateName(prefix string) W {
	o.m.GenerateName = prefix
	return o.self
}

// UID sets metadata.uid, as the API server would (for tests without one).
func (o objectMeta[W]) UID(uid types.UID) W {
	o.m.UID = uid
	return o.self
}

// ResourceVersion sets metadata.resourceVersion, as the API server would.
func (o objectMeta[W]) ResourceVersion(rv string) W {
	o.m.ResourceVersion = rv
	return o.self
}

// Generation sets metadata.generation, as the API server would.
func (o objectMeta[W]) Generation(g int64) W {
	o.m.Generation = g
	return o.self
}

// Created sets metadata.creationTimestamp, as the API server would.
func (o objectMeta[W]) Created(at time.Time) W {
	o.m.CreationTimestamp = metav1.NewTime(at)
	return o.self
}

// Deleting marks the object as being deleted since at. A fake client keeps such an object only
// while it has a finalizer; Finalizers adds one.
func (o objectMeta[W]) Deleting(at time.Time) W {
	o.m.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return o.self
}

// Finalizers adds finalizers.
func (o objectMeta[W]) Finalizers(names ...string) W {
	o.m.Finalizers = append(o.m.Finalizers, names...)
	return o.self
}

// ControlledBy makes owner, of kind gvk, the object's controller.
func (o objectMeta[W]) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) W {
	o.m.OwnerReferences = append(o.m.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return o.self
}

// podMetadata sets the labels and annotations of the pods made from the object.
type podMetadata[W any] struct {
	self        W
	labels      *map[string]string
	annotations *map[string]string
}

// PodLabel sets one label of the pod.
func (p podMetadata[W]) PodLabel(key, value string) W {
	*p.labels = with(*p.labels, key, value)
	return p.self
}

// PodLabels adds labels of the pod (keeping the ones already set).
func (p podMetadata[W]) PodLabels(kv map[string]string) W {
	for k, v := range kv {
		*p.labels = with(*p.labels, k, v)
	}
	return p.self
}

// PodAnnotation sets one annotation of the pod.
func (p podMetadata[W]) PodAnnotation(key, value string) W {
	*p.annotations = with(*p.annotations, key, value)
	return p.self
}

// PodAnnotations adds annotations of the pod (keeping the ones already set).
func (p podMetadata[W]) PodAnnotations(kv map[string]string) W {
	for k, v := range kv {
		*p.annotations = with(*p.annotations, k, v)
	}
	return p.self
}

// podSpec sets the pod spec; container methods act on the first container.
type podSpec[W any] struct {
	self W
	spec *corev1.PodSpec
}

func (p podSpec[W]) container() *corev1.Container {
	if len(p.spec.Containers) == 0 {
		p.spec.Containers = []corev1.Container{{Name: "runtime"}}
	}
	return &p.spec.Containers[0]
}

// Containers replaces the pod's containers.
func (p podSpec[W]) Containers(cs ...corev1.Container) W {
	p.spec.Containers = append([]corev1.Container(nil), cs...)
	return p.self
}

// Image sets the image of the first container.
func (p podSpec[W]) Image(image string) W {
	p.container().Image = image
	return p.self
}

// Command sets the command of the first container.
func (p podSpec[W]) Command(argv ...string) W {
	p.container().Command = argv
	return p.self
}

// Env adds (or replaces) an environment variable of the first container.
func (p podSpec[W]) Env(name, value string) W {
	c := p.container()
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			return p.self
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	return p.self
}

// VolumeMount mounts the volume name at path in the first container.
func (p podSpec[W]) VolumeMount(name, path string) W {
	c := p.container()
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	return p.self
}

// AutomountServiceAccountToken sets the pod's automountServiceAccountToken; nil leaves it
// unset.
func (p podSpec[W]) AutomountServiceAccountToken(mount *bool) W {
	p.spec.AutomountServiceAccountToken = mount
	return p.self
}

// TerminationGracePeriod sets the pod's terminationGracePeriodSeconds.
func (p podSpec[W]) TerminationGracePeriod(seconds int64) W {
	p.spec.TerminationGracePeriodSeconds = ptr.To(seconds)
	return p.self
}

// NodeSelector sets one label of the pod's nodeSelector.
func (p podSpec[W]) NodeSelector(key, value string) W {
	p.spec.NodeSelector = with(p.spec.NodeSelector, key, value)
	return p.self
}

// RuntimeClass sets the pod's runtimeClassName; nil leaves it unset.
func (p podSpec[W]) RuntimeClass(name *string) W {
	p.spec.RuntimeClassName = name
	return p.self
}

// PodSecurity sets the pod's securityContext.
func (p podSpec[W]) PodSecurity(sc *corev1.PodSecurityContext) W {
	p.spec.SecurityContext = sc
	return p.self
}

// ContainerSecurity sets the first container's securityContext.
func (p podSpec[W]) ContainerSecurity(sc *corev1.SecurityContext) W {
	p.container().SecurityContext = sc
	return p.self
}

// InitContainers replaces the pod's init containers.
func (p podSpec[W]) InitContainers(cs ...corev1.Container) W {
	p.spec.InitContainers = append([]corev1.Container(nil), cs...)
	return p.self
}

// with sets m[k] = v, making m when it is nil.
func with(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// setCondition replaces the condition of c's type, or appends c, leaving every field as given
// (meta.SetStatusCondition would stamp the current time).
func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			(*conds)[i] = c
			return
		}
	}
	*conds = append(*conds, c)
}
