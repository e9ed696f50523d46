// pulumi-language-python: the Python language host the Pulumi engine starts to run this
// project's program and its policy pack.
//
// The upstream host (module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
// is refused by the Go module proxy this project can reach, so spear-fleet builds this small
// host against the same sdk/v3 release instead. It implements what `pulumi preview/up/destroy/
// refresh`, `pulumi install` and `--policy-pack` need, and runs programs through the upstream
// `pulumi-language-python-exec` script shipped in sdk/v3, which must sit next to this binary.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Set at build time to the Pulumi release this host is built against.
var version = "dev"

// Exit code the exec script uses after it has already shown the user an actionable error.
const exitAfterUserMessage = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	execScript    string
	engineAddress string // the engine's RPC address, which the SDK logs through
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	h := &host{
		execScript:    filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"),
		engineAddress: engineAddressArg(os.Args[1:]),
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(s, h)
			return nil
		},
	})
	if err != nil {
		fatal(err)
	}
	// The engine reads the port from the first line of stdout.
	fmt.Println(handle.Port)
	if err := <-handle.Done; err != nil {
		fatal(err)
	}
}

// engineAddressArg picks the engine address, the one positional argument the engine passes
// after any -flag=value options.
func engineAddressArg(args []string) string {
	for i := len(args) - 1; i >= 0; i-- {
		if !strings.HasPrefix(args[i], "-") {
			return args[i]
		}
	}
	return ""
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

// python returns the interpreter for a program: the `virtualenv` runtime option (relative to
// the project root) when set, else PULUMI_PYTHON_CMD, else python3.
func python(info *pulumirpc.ProgramInfo) string {
	if venv := option(info, "virtualenv"); venv != "" {
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(info.GetRootDirectory(), venv)
		}
		return filepath.Join(venv, "bin", "python")
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return cmd
	}
	return "python3"
}

func option(info *pulumirpc.ProgramInfo, name string) string {
	if info == nil || info.GetOptions() == nil {
		return ""
	}
	if v, ok := info.GetOptions().GetFields()[name]; ok {
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			return s.StringValue
		}
	}
	return ""
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// pluginManifest lists the resource plugins that installed Python packages declare in their
// pulumi-plugin.json, as the upstream host does.
const pluginManifest = `
import importlib.metadata as md, json
found = []
for dist in md.distributions():
    for f in dist.files or ():
        if f.name == "pulumi-plugin.json":
            meta = json.loads(f.read_text())
            if meta.get("resource"):
                found.append({"name": meta.get("name", ""), "version": meta.get("version", ""),
                              "server": meta.get("server", "")})
print(json.dumps(found))
`

type manifestEntry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Server  string `json:"server"`
}

func (h *host) resourcePlugins(ctx context.Context, info *pulumirpc.ProgramInfo) ([]manifestEntry, error) {
	out, err := exec.CommandContext(ctx, python(info), "-c", pluginManifest).Output()
	if err != nil {
		return nil, fmt.Errorf("listing plugins of installed Python packages: %w", err)
	}
	var entries []manifestEntry
	return entries, json.Unmarshal(out, &entries)
}

func withV(v string) string {
	if v != "" && !strings.HasPrefix(v, "v") {
		return "v" + v
	}
	return v
}

func (h *host) GetRequiredPlugins(ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	entries, err := h.resourcePlugins(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPluginsResponse{}
	for _, e := range entries {
		resp.Plugins = append(resp.Plugins, &pulumirpc.PluginDependency{
			Name: e.Name, Kind: "resource", Version: withV(e.Version), Server: e.Server,
		})
	}
	return resp, nil
}

func (h *host) GetRequiredPackages(ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	entries, err := h.resourcePlugins(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPackagesResponse{}
	for _, e := range entries {
		resp.Packages = append(resp.Packages, &pulumirpc.PackageDependency{
			Name: e.Name, Kind: "resource", Version: withV(e.Version), Server: e.Server,
		})
	}
	return resp, nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	program := req.GetProgram()
	if program == "" {
		program = "."
	}
	args := []string{"-u", h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--organization", req.GetOrganization(),
		"--root_directory", req.GetInfo().GetRootDirectory(),
		program,
	}
	args = append(args, req.GetArgs()...)

	// The SDK expects a JSON object and a JSON list, never null.
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(append([]string{}, req.GetConfigSecretKeys()...))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python(req.GetInfo()), args...)
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys),
	)
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("running the Python program: %v", err)}, nil
	}
}

// RunPlugin runs a Python policy pack: `python -m pulumi.policy <engine> <pack dir>`, streaming
// its output back, the port it prints included.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, stream pulumirpc.LanguageRuntime_RunPluginServer) error {
	if kind := req.GetKind(); kind != "" && kind != "analyzer" {
		return fmt.Errorf("this Python language host runs policy packs only, not %q plugins", kind)
	}
	args := append([]string{"-u", "-m", "pulumi.policy"}, req.GetArgs()...)
	args = append(args, pluginProgram(req))
	cmd := exec.CommandContext(stream.Context(), python(req.GetInfo()), args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(os.Environ(), req.GetEnv()...)
	cmd.Stdout = streamWriter(func(b []byte) error {
		return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: b}})
	})
	cmd.Stderr = streamWriter(func(b []byte) error {
		return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: b}})
	})
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return stream.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: 0}})
	case errors.As(err, &exitErr):
		return stream.Send(&pulumirpc.RunPluginResponse{
			Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exitErr.ExitCode())},
		})
	default:
		return err
	}
}

// pluginProgram is the pack to run: the engine names it in the program info.
func pluginProgram(req *pulumirpc.RunPluginRequest) string {
	if req.GetProgram() != "" {
		return req.GetProgram()
	}
	return filepath.Join(req.GetInfo().GetProgramDirectory(), req.GetInfo().GetEntryPoint())
}

type streamWriter func([]byte) error

func (w streamWriter) Write(p []byte) (int, error) {
	// gRPC may hold on to the slice after Send returns; the writer's buffer is reused.
	if err := w(bytes.Clone(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// InstallDependencies backs `pulumi install`: it creates the virtualenv named in Pulumi.yaml
// when missing and installs requirements.txt into it.
func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest, stream pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	info := req.GetInfo()
	out := streamWriter(func(b []byte) error {
		return stream.Send(&pulumirpc.InstallDependenciesResponse{Stdout: b})
	})
	errOut := streamWriter(func(b []byte) error {
		return stream.Send(&pulumirpc.InstallDependenciesResponse{Stderr: b})
	})
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(stream.Context(), name, args...)
		cmd.Dir = info.GetProgramDirectory()
		cmd.Stdout, cmd.Stderr = out, errOut
		return cmd.Run()
	}
	py := python(info)
	if option(info, "virtualenv") != "" {
		if _, err := os.Stat(py); err != nil {
			if err := run("python3", "-m", "venv", filepath.Dir(filepath.Dir(py))); err != nil {
				return fmt.Errorf("creating the virtualenv: %w", err)
			}
		}
	}
	requirements := filepath.Join(info.GetRootDirectory(), "requirements.txt")
	if _, err := os.Stat(requirements); err != nil {
		return nil
	}
	return run(py, "-m", "pip", "install", "-r", requirements)
}

func (h *host) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	out, err := exec.CommandContext(ctx, python(req.GetInfo()), "-m", "pip", "list", "--format", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("listing installed Python packages: %w", err)
	}
	var pkgs []struct{ Name, Version string }
	if err := json.Unmarshal(out, &pkgs); err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range pkgs {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	py := python(req.GetInfo())
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, py, "--version")
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("running %s --version: %w", py, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py,
		Version:    strings.TrimPrefix(strings.TrimSpace(out.String()), "Python "),
	}, nil
}
