"""The component provider: Pulumi's ComponentProvider for gpupools' components, reporting bad inputs in one line.

ComponentProvider (pulumi/provider/experimental/component.py, pulumi 3.272) infers the schema from the components'
argument classes and constructs them; it is what `component_provider_host` hosts. It wraps whatever a component's
constructor raises in a ComponentInitError (component.py `construct`, lines 96-100), which the gRPC servicer answers
with the message and a traceback (pulumi/provider/server.py `Construct`, lines 141-148). An InputPropertiesError
raised by `construct` itself is answered as INVALID_ARGUMENT with its message alone (server.py lines 127-132,
`create_grpc_invalid_properties_status`), so a validation error leaves this provider as one: the stack file's
one-line errors, one per problem, nothing else. No property paths go with them (an empty list of them): the engine prints the value at
each path it is given (pkg/resource/deploy/source_eval.go `errorToMessage`), and a value in the wrong place may be
a credential.

The inputs reach a component through `map_inputs` (component.py `construct`, before the constructor and outside its
`try`), which this provider does itself (inputs.py `provider_inputs` says what Pulumi's mapping loses); the problems
found there leave the same way.
"""

import inspect
from importlib.metadata import PackageNotFoundError, version

from pulumi.errors import InputPropertiesError
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ComponentInitError

from gpupools.stack.errors import ConfigError

from gpupools_components.inputs import provider_inputs
from gpupools_components.resources import COMPONENTS

NAME = "gpupools"


def package_version() -> str:
    try:
        return version("gpupools")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0.0.0"


class GpuPoolsProvider(ComponentProvider):
    def __init__(self, components, name, version):
        super().__init__(components, name, version=version)
        # Each component's argument class, found as the analyzer finds it (analyzer.py `analyze_component`).
        self._arguments = {c.__name__: inspect.get_annotations(c.__init__)["args"] for c in components}

    def map_inputs(self, inputs, component_def):
        return provider_inputs(inputs, self._arguments[component_def.name])

    def construct(self, name, resource_type, inputs, options=None):
        try:
            return super().construct(name, resource_type, inputs, options)
        except ConfigError as exc:  # from map_inputs
            problems = exc
        except ComponentInitError as exc:
            if not isinstance(exc.inner, ConfigError):
                raise
            problems = exc.inner
        # An empty list, not None: without property errors the servicer builds a status with no trailing metadata,
        # which grpc's abort_with_status then fails on (server.py `create_grpc_invalid_properties_status`).
        raise InputPropertiesError(f"invalid inputs of {resource_type} {name}:\n{problems}", []) from None


def provider() -> GpuPoolsProvider:
    return GpuPoolsProvider(COMPONENTS, NAME, version=package_version())


def schema_text() -> str:
    """The package schema as components/schema.json holds it."""
    import json

    return json.dumps(json.loads(provider().schema), indent=2, sort_keys=True) + "\n"
