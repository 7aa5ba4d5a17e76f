// Package tracing sets up OpenTelemetry traces for the manager's
// subcommands from the standard OTEL_* environment variables, and carries
// W3C trace context in and out of MCP messages (HTTP headers and
// params._meta). Nothing is set up when no exporter is configured: the
// callers then get no tracer and start no spans at all. Spans go out
// through the SDK's batch span processor to the OTLP exporter of
// internal/tracing/otlp.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/internal/tracing/otlp"
)

// The OTEL_* variables that turn tracing on or off. The exporter's
// OTEL_EXPORTER_OTLP_* variables are read by otlp.ConfigFromEnv; the SDK
// reads the rest itself (OTEL_TRACES_SAMPLER and its argument, OTEL_BSP_*,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME).
const (
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = otlp.ProtocolGRPC
	ProtocolHTTP = otlp.ProtocolHTTP
)

// Provider is the tracing of one process: a tracer provider exporting over
// OTLP, or nothing when tracing is off.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when off
}

// Setup reads the OTEL_* environment and returns the process's tracing.
// Tracing is on when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp says so, and off when OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. service names the process in the traces
// (service.name) unless OTEL_SERVICE_NAME does.
func Setup(ctx context.Context, service, version string) (*Provider, error) {
	on, err := configured()
	if err != nil || !on {
		return &Provider{}, err
	}
	config, err := otlp.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	config.Version = version
	exp, err := otlp.New(config)
	if err != nil {
		return nil, fmt.Errorf("while setting up the OTLP %s trace exporter: %w", config.Protocol, err)
	}
	// WithFromEnv comes last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("while reading the trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	// No sampler option: the SDK takes OTEL_TRACES_SAMPLER and its argument
	// (parentbased_always_on when unset).
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// configured says whether the environment turns tracing on; an error for
// an exporter this process does not have.
func configured() (on bool, err error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envDisabled)), "true") {
		return false, nil
	}
	switch exporter := strings.TrimSpace(os.Getenv(envExporter)); exporter {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return strings.TrimSpace(os.Getenv(envEndpoint)) != "" || strings.TrimSpace(os.Getenv(envTracesEndpoint)) != "", nil
	default:
		return false, fmt.Errorf("%s=%q is not supported: use otlp or none", envExporter, exporter)
	}
}

// Enabled says whether traces are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Tracer is the named tracer, nil when tracing is off: callers start no
// spans then, which costs nothing.
func (p *Provider) Tracer(name string) trace.Tracer {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Tracer(name)
}

// TracerProvider is the provider itself, nil when tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return nil
	}
	return p.sdk
}

// Shutdown exports the spans still queued and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("while flushing the last spans: %w", err)
	}
	return nil
}
