package check

// The Dockerfile, read as text: a build stage and a runtime stage, the runtime stage's user,
// entrypoint, command and stop signal, and that the programs they start are copied in.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line    int    // where it starts, from 1
	keyword string // upper case: FROM, COPY, ...
	args    string
}

// stage is one FROM and the instructions after it.
type stage struct {
	line         int
	image, name  string
	instructions []instruction
}

// parseDockerfile splits a Dockerfile into stages of instructions; comments, parser directives
// and blank lines are dropped, and lines ending in a backslash are joined to the next.
func parseDockerfile(text string) []stage {
	var stages []stage
	var pending []string
	start := 0
	emit := func() {
		joined := strings.TrimSpace(strings.Join(pending, " "))
		pending = nil
		if joined == "" {
			return
		}
		keyword, args, _ := strings.Cut(joined, " ")
		in := instruction{line: start, keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)}
		if in.keyword == "FROM" {
			fields := strings.Fields(in.args)
			s := stage{line: in.line}
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"): // --platform=...
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					s.name = fields[i+1]
					i++
				case s.image == "":
					s.image = fields[i]
				}
			}
			stages = append(stages, s)
			return
		}
		if len(stages) > 0 {
			last := &stages[len(stages)-1]
			last.instructions = append(last.instructions, in)
		}
	}
	for number, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment or a parser directive, also inside a continued instruction
		}
		if len(pending) == 0 {
			if trimmed == "" {
				continue
			}
			start = number + 1
		}
		if body, continued := strings.CutSuffix(strings.TrimRight(line, " \t\r"), "\\"); continued {
			pending = append(pending, strings.TrimSpace(body))
			continue
		}
		pending = append(pending, trimmed)
		emit()
	}
	emit()
	return stages
}

// last returns the stage's last instruction with that keyword, if any (the one that counts for
// USER, ENTRYPOINT, CMD and STOPSIGNAL).
func (s stage) last(keyword string) (instruction, bool) {
	for i := len(s.instructions) - 1; i >= 0; i-- {
		if s.instructions[i].keyword == keyword {
			return s.instructions[i], true
		}
	}
	return instruction{}, false
}

// copied lists the paths the stage's COPY instructions from another stage put in the image.
func (s stage) copied() (paths []string, from []string) {
	for _, in := range s.instructions {
		if in.keyword != "COPY" {
			continue
		}
		var sources []string
		source := ""
		for _, field := range strings.Fields(in.args) {
			if value, ok := strings.CutPrefix(field, "--from="); ok {
				source = value
				continue
			}
			if strings.HasPrefix(field, "--") {
				continue
			}
			sources = append(sources, field)
		}
		if source == "" || len(sources) < 2 {
			continue
		}
		from = append(from, source)
		destination := sources[len(sources)-1]
		for _, src := range sources[:len(sources)-1] {
			if strings.HasSuffix(destination, "/") {
				paths = append(paths, destination+path.Base(src))
			} else {
				paths = append(paths, destination)
			}
		}
	}
	return paths, from
}

// execForm decodes an instruction's JSON array (exec form); the error says it is not one.
func execForm(in instruction) ([]string, error) {
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
		return nil, fmt.Errorf("%s %s is not in exec form (a JSON array of strings): a shell would be process 1 and keep the signals from the service, and the runtime image has no shell", in.keyword, in.args)
	}
	return argv, nil
}

// CheckDockerfileFile reads and checks a Dockerfile ([CheckDockerfile]); the error is for a
// file that cannot be read.
func CheckDockerfileFile(file string) ([]Problem, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the Dockerfile %s: %w", file, err)
	}
	return CheckDockerfile(file, string(data)), nil
}

// CheckDockerfile checks a Dockerfile's text (file names it in the findings): a named build
// stage and a runtime stage that copies from it, on another base; in the runtime stage a user
// other than root, `ENTRYPOINT ["…/cotenant", "run", "--"]`, a command in exec form whose
// service listens on every address, `STOPSIGNAL SIGINT`, and both programs copied in.
func CheckDockerfile(file, text string) []Problem {
	var ps problems
	stages := parseDockerfile(text)
	if len(stages) < 2 {
		ps.add(file, "FROM", "%d stage(s): want a build stage and a runtime stage, so that the toolchain stays out of the image", len(stages))
		return ps
	}
	build, runtime := stages[0], stages[len(stages)-1]
	where := func(in instruction) string { return fmt.Sprintf("line %d: %s", in.line, in.keyword) }
	if build.name == "" {
		ps.add(file, fmt.Sprintf("line %d: FROM", build.line), "the build stage has no name (FROM IMAGE AS NAME) for the runtime stage to copy from")
	}
	if runtime.image == build.image {
		ps.add(file, fmt.Sprintf("line %d: FROM", runtime.line), "the runtime stage starts from the build stage's image %s: the toolchain would ship in the image", build.image)
	}
	paths, sources := runtime.copied()
	fromBuild := false
	for _, source := range sources {
		if source == build.name || source == "0" {
			fromBuild = true
		}
	}
	if !fromBuild {
		ps.add(file, "COPY", "the runtime stage copies nothing from the build stage (COPY --from=%s)", build.name)
	}
	isCopied := func(program string) bool {
		for _, p := range paths {
			if p == program {
				return true
			}
		}
		return false
	}

	if user, ok := runtime.last("USER"); !ok {
		ps.add(file, "USER", "the runtime stage sets no user: the service would run as the base image's, root unless it says otherwise")
	} else if name, _, _ := strings.Cut(user.args, ":"); name == "" || name == "root" || name == "0" {
		ps.add(file, where(user), "%q is root: run the service as an unprivileged user", user.args)
	}

	if entrypoint, ok := runtime.last("ENTRYPOINT"); !ok {
		ps.add(file, "ENTRYPOINT", "the runtime stage has none: want [\"/usr/local/bin/cotenant\", \"run\", \"--\"]")
	} else if argv, err := execForm(entrypoint); err != nil {
		ps.add(file, where(entrypoint), "%v", err)
	} else {
		if path.Base(argv[0]) != "cotenant" || len(argv) < 3 || argv[1] != "run" || argv[len(argv)-1] != "--" {
			ps.add(file, where(entrypoint), "%q is not cotenant run -- : the command would start without the CPU count in its environment", argv)
		}
		if !isCopied(argv[0]) {
			ps.add(file, where(entrypoint), "%s is not copied into the runtime stage", argv[0])
		}
	}

	if cmd, ok := runtime.last("CMD"); !ok {
		ps.add(file, "CMD", "the runtime stage has none: `docker run IMAGE` would run cotenant run with nothing to run")
	} else if argv, err := execForm(cmd); err != nil {
		ps.add(file, where(cmd), "%v", err)
	} else {
		if !isCopied(argv[0]) {
			ps.add(file, where(cmd), "%s is not copied into the runtime stage", argv[0])
		}
		for i, arg := range argv {
			if arg != "--addr" || i+1 >= len(argv) {
				continue
			}
			host, _, err := net.SplitHostPort(argv[i+1])
			if ip := net.ParseIP(host); err != nil || host == "localhost" || (ip != nil && ip.IsLoopback()) {
				ps.add(file, where(cmd), "--addr %s: the service must listen on the container's address, not a loopback one", argv[i+1])
			}
		}
	}

	if signal, ok := runtime.last("STOPSIGNAL"); !ok || strings.ToUpper(signal.args) != "SIGINT" {
		ps.add(file, "STOPSIGNAL", "not SIGINT: the example service stops gracefully on SIGINT only, and as process 1 of its container it ignores the default SIGTERM until it is killed")
	}
	return ps
}
