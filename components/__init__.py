"""Pulumi components that turn gpupools' decisions into resources.

Import the module of the cloud you use (`gpupools.components.aws`, `.azure`, `.gcp`); each imports only its
own cloud SDK. `gpupools.components.platform.GpuPlatform` builds a whole stack from a `StackConfig`.
"""
