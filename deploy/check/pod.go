package check

// One pod spec: the fields each container that runs cotenant needs (started through
// `cotenant run`, /dev/shm, a user, a CPU limit, a probe), the fields the containers of one pod
// must agree on to cooperate (one token set, one /dev/shm, one user), and the scrape
// annotations.

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// cotenantContainer is what the pod-wide checks compare between a pod's cotenant containers.
type cotenantContainer struct {
	c     *corev1.Container
	field string
	// shmVolume is the volume mounted at /dev/shm ("" if none).
	shmVolume string
	// runAsUser is the container's user, from its securityContext or the pod's (nil if neither).
	runAsUser *int64
	// tokensSet is the literal value of COTENANT_TOKENS_SET ("" if not set).
	tokensSet string
	// tokensOff says whether COTENANT_TOKENS turns the tokens off.
	tokensOff bool
}

// checkWorkload checks one pod spec; it returns whether two or more of its containers run
// cotenant (a cooperating pod).
func checkWorkload(w workload, ps *problems) bool {
	specField := w.field("spec")
	if w.spec.HostIPC && w.meta.Annotations[hostIPCReasonAnnotation] == "" {
		ps.add(w.file, specField+".hostIPC", "is true: the pod would share System V IPC, token sets included, with the node and every pod that sets it, while its containers already share the pod's own IPC namespace; if that is meant, say why in the annotation %s", hostIPCReasonAnnotation)
	}
	checkPortsUnique(w, ps)
	var ours []cotenantContainer
	for i := range w.spec.Containers {
		c := &w.spec.Containers[i]
		if runsCotenant(c) {
			ours = append(ours, checkContainer(w, c, fmt.Sprintf("%s.containers[%s]", specField, c.Name), ps))
		}
	}
	if len(ours) == 0 {
		ps.add(w.file, specField+".containers", "no container runs cotenant (a command starting with cotenant, or the cotenant image)")
		return false
	}
	checkScrape(w, ours, ps)
	if len(ours) < 2 {
		return false
	}
	checkCooperation(w, ours, ps)
	return true
}

// checkContainer checks one container that runs cotenant, and returns what the pod-wide
// checks compare.
func checkContainer(w workload, c *corev1.Container, field string, ps *problems) cotenantContainer {
	out := cotenantContainer{c: c, field: field}
	argv := append(append([]string{}, c.Command...), c.Args...)
	checkCommand(w.file, field, c, argv, ps)
	checkListenAddress(w.file, field, c, argv, ps)
	out.shmVolume = checkShm(w, c, field, ps)
	out.runAsUser = runAsUser(&w.spec, c)
	switch {
	case out.runAsUser == nil:
		ps.add(w.file, field+".securityContext.runAsUser", "not set here nor in %s.securityContext: the image's user then decides, and nothing shows that the pod's cotenant containers run as one user (token sets are per user)", w.field("spec"))
	case *out.runAsUser == 0:
		ps.add(w.file, field+".securityContext.runAsUser", "is 0 (root): run the service as an unprivileged user")
	}
	for _, env := range c.Env {
		envField := fmt.Sprintf("%s.env[%s]", field, env.Name)
		switch env.Name {
		case tokensSetEnv:
			if env.ValueFrom != nil {
				ps.add(w.file, envField, "takes its value from elsewhere (valueFrom): write the set's name as a value, so that the manifest shows it is the same in every container of the pod")
				continue
			}
			out.tokensSet = env.Value
		case tokensEnv:
			switch strings.ToLower(strings.TrimSpace(env.Value)) {
			case "off", "0", "false", "no":
				out.tokensOff = true
			}
		}
	}
	cpuLimit, ok := c.Resources.Limits[corev1.ResourceCPU]
	if !ok || cpuLimit.Sign() <= 0 {
		ps.add(w.file, field+".resources.limits.cpu", "not set: the CPU limit is the container's CPU quota, the count `cotenant run` and the pool read; without it they size for every CPU of the node")
	} else if cpuRequest, ok := c.Resources.Requests[corev1.ResourceCPU]; ok && cpuRequest.Cmp(cpuLimit) > 0 {
		ps.add(w.file, field+".resources.requests.cpu", "%s is above the limit %s: the API server refuses it", cpuRequest.String(), cpuLimit.String())
	}
	checkReadiness(w.file, field, c, ps)
	return out
}

// checkCommand: the container starts through `cotenant run -- SERVICE`.
func checkCommand(file, field string, c *corev1.Container, argv []string, ps *problems) {
	if len(c.Command) == 0 {
		ps.add(file, field+".command", "not set: write the image's entrypoint out ([/usr/local/bin/cotenant, run, --]), so that the manifest shows the container starts through cotenant run; a command set later without it would silently drop it")
		return
	}
	if path.Base(argv[0]) != "cotenant" || len(argv) < 2 || argv[1] != "run" {
		ps.add(file, field+".command", "%q does not start with cotenant run: the service would size its threads without the container's CPU limit", c.Command)
		return
	}
	separator := -1
	for i := 2; i < len(argv); i++ {
		if argv[i] == "--" {
			separator = i
			break
		}
	}
	switch {
	case separator < 0:
		ps.add(file, field+".command", "%q has no -- before the service's command: the service's options could be read as cotenant run's own", argv)
	case separator == len(argv)-1:
		ps.add(file, field+".args", "nothing follows cotenant run --: no service to run")
	}
}

// serviceName is the base name of the program cotenant run starts ("" if none).
func serviceName(argv []string) string {
	for i, arg := range argv {
		if arg == "--" && i+1 < len(argv) {
			return path.Base(argv[i+1])
		}
	}
	return ""
}

// checkListenAddress: a service given --addr listens on the pod's address, on a declared port.
func checkListenAddress(file, field string, c *corev1.Container, argv []string, ps *problems) {
	addr, found := "", false
	for i, arg := range argv {
		if arg == "--addr" && i+1 < len(argv) {
			addr, found = argv[i+1], true
		}
		if value, ok := strings.CutPrefix(arg, "--addr="); ok {
			addr, found = value, true
		}
	}
	if !found {
		if serviceName(argv) == "http_service" {
			ps.add(file, field+".args", "no --addr: the example service then listens on 127.0.0.1:8080, which neither Prometheus nor the probe can reach")
		}
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		ps.add(file, field+".args", "--addr %q is not HOST:PORT: %v", addr, err)
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		ps.add(file, field+".args", "--addr %q is a loopback address: Prometheus and the probe connect to the pod's address", addr)
	}
	number, err := strconv.ParseInt(port, 10, 32)
	if err != nil || !exposes(c, int32(number)) {
		ps.add(file, field+".ports", "does not declare the port the service listens on (--addr %s)", addr)
	}
}

// checkShm: a memory-backed emptyDir is mounted at /dev/shm, writable and whole; returns the
// volume's name ("" if nothing is mounted there).
func checkShm(w workload, c *corev1.Container, field string, ps *problems) string {
	for i, mount := range c.VolumeMounts {
		if path.Clean(mount.MountPath) != shmPath {
			continue
		}
		mountField := fmt.Sprintf("%s.volumeMounts[%d]", field, i)
		if mount.ReadOnly {
			ps.add(w.file, mountField+".readOnly", "is true: the hand-over pipe is created in %s", shmPath)
		}
		if mount.SubPath != "" || mount.SubPathExpr != "" {
			ps.add(w.file, mountField+".subPath", "is set: every container must see the whole volume, so that they find the same pipe")
		}
		volume := findVolume(&w.spec, mount.Name)
		volumeField := fmt.Sprintf("%s.volumes[%s]", w.field("spec"), mount.Name)
		switch {
		case volume == nil:
			ps.add(w.file, mountField+".name", "%q is not among the pod's volumes", mount.Name)
		case volume.EmptyDir == nil:
			ps.add(w.file, volumeField, "is not an emptyDir: mount a memory-backed emptyDir at %s, one tmpfs the pod's containers share", shmPath)
		case volume.EmptyDir.Medium != corev1.StorageMediumMemory:
			ps.add(w.file, volumeField+".emptyDir.medium", "is %q, not Memory: %s must be a tmpfs, as a runtime's own is", string(volume.EmptyDir.Medium), shmPath)
		}
		return mount.Name
	}
	ps.add(w.file, field+".volumeMounts", "nothing is mounted at %s: mount the pod's memory-backed emptyDir there, so that the token hand-over pipe is one file for every container", shmPath)
	return ""
}

// findVolume returns the pod's volume of that name, or nil.
func findVolume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// runAsUser is the container's user: its own securityContext's, else the pod's (nil if neither
// says).
func runAsUser(spec *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

// checkReadiness: an HTTP readiness probe on a port the container declares.
func checkReadiness(file, field string, c *corev1.Container, ps *problems) {
	probe := c.ReadinessProbe
	if probe == nil {
		ps.add(file, field+".readinessProbe", "not set: the pod would receive traffic before the service listens")
		return
	}
	if probe.HTTPGet == nil {
		ps.add(file, field+".readinessProbe.httpGet", "not set: probe the service over HTTP, on the port it serves")
		return
	}
	if !resolvesPort(c, probe.HTTPGet.Port) {
		ps.add(file, field+".readinessProbe.httpGet.port", "%s is not a port the container declares", probe.HTTPGet.Port.String())
	}
}

// resolvesPort says whether a port given by number or name is one the container declares.
func resolvesPort(c *corev1.Container, port intstr.IntOrString) bool {
	for _, p := range c.Ports {
		if port.Type == intstr.String && p.Name == port.StrVal {
			return true
		}
		if port.Type == intstr.Int && p.ContainerPort == port.IntVal {
			return true
		}
	}
	return false
}

// exposes says whether the container declares that port number.
func exposes(c *corev1.Container, port int32) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return true
		}
	}
	return false
}

// checkPortsUnique: the containers of a pod share one network namespace, so two of them cannot
// listen on one port, and port names must be unique for probes and PodMonitors to name them.
func checkPortsUnique(w workload, ps *problems) {
	numbers := map[int32]string{}
	names := map[string]string{}
	for _, c := range w.spec.Containers {
		field := fmt.Sprintf("%s.containers[%s].ports", w.field("spec"), c.Name)
		for _, p := range c.Ports {
			if other, taken := numbers[p.ContainerPort]; taken {
				ps.add(w.file, field, "port %d is also declared by container %s: the containers of a pod share one network namespace", p.ContainerPort, other)
			}
			numbers[p.ContainerPort] = c.Name
			if p.Name == "" {
				continue
			}
			if other, taken := names[p.Name]; taken {
				ps.add(w.file, field, "port name %q is also used by container %s", p.Name, other)
			}
			names[p.Name] = c.Name
		}
	}
}

// checkScrape: the pod asks to be scraped, on /metrics, on a port a cotenant container declares.
func checkScrape(w workload, ours []cotenantContainer, ps *problems) {
	annotations := w.meta.Annotations
	field := w.field("metadata.annotations")
	if annotations[scrapeAnnotation] != "true" {
		ps.add(w.file, field, "%s is %q, not \"true\": the usual Prometheus pod discovery keeps only the pods that ask to be scraped", scrapeAnnotation, annotations[scrapeAnnotation])
	}
	if annotations[pathAnnotation] != metricsPath {
		ps.add(w.file, field, "%s is %q, not %q, the path the services serve their metrics on", pathAnnotation, annotations[pathAnnotation], metricsPath)
	}
	text, ok := annotations[portAnnotation]
	if !ok {
		ps.add(w.file, field, "%s is missing: Prometheus would scrape every declared port of the pod", portAnnotation)
		return
	}
	port, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		ps.add(w.file, field, "%s is %q, not a port number", portAnnotation, text)
		return
	}
	for _, o := range ours {
		if exposes(o.c, int32(port)) {
			return
		}
	}
	ps.add(w.file, field, "%s is %s, a port no cotenant container of the pod declares", portAnnotation, text)
}

// checkCooperation: the pod's cotenant containers name one token set, mount one /dev/shm and
// run as one user; their process ids are unique within the pod.
func checkCooperation(w workload, ours []cotenantContainer, ps *problems) {
	for _, o := range ours {
		if o.tokensSet == "" {
			ps.add(w.file, o.field+".env", "%s is not set: each container would open default-<its CPUs>, the same set only while the containers may run on the same CPUs; name one set in every cotenant container of the pod", tokensSetEnv)
		}
		if o.tokensOff {
			ps.add(w.file, fmt.Sprintf("%s.env[%s]", o.field, tokensEnv), "turns the host tokens off: this container would not cooperate")
		}
	}
	first := ours[0]
	for _, o := range ours[1:] {
		if o.tokensSet != "" && first.tokensSet != "" && o.tokensSet != first.tokensSet {
			ps.add(w.file, fmt.Sprintf("%s.env[%s]", o.field, tokensSetEnv), "is %q, but container %s names %q: containers cooperate only through one set", o.tokensSet, first.c.Name, first.tokensSet)
		}
		if o.shmVolume != "" && first.shmVolume != "" && o.shmVolume != first.shmVolume {
			ps.add(w.file, o.field+".volumeMounts", "mounts volume %q at %s, and container %s mounts %q: the hand-over pipe must be one file for both", o.shmVolume, shmPath, first.c.Name, first.shmVolume)
		}
		if o.runAsUser != nil && first.runAsUser != nil && *o.runAsUser != *first.runAsUser {
			ps.add(w.file, o.field+".securityContext.runAsUser", "is %d, and container %s runs as %d: a token set belongs to one user, and another user's processes cannot open it", *o.runAsUser, first.c.Name, *first.runAsUser)
		}
	}
	if w.spec.ShareProcessNamespace == nil || !*w.spec.ShareProcessNamespace {
		ps.add(w.file, w.field("spec.shareProcessNamespace"), "is not true: the pools' status records in the shared %s are named by process id, and each container's first process is process 1 of its own process namespace, so the containers' records would collide (the token sets do not need it)", shmPath)
	}
}
