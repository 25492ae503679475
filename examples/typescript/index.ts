// gpupools' GpuPlatform from a TypeScript program: the stack file's keys as typed inputs (docs/components.md).
// Set up once: `pulumi package add ../../components` (generates sdks/gpupools), `npm install`,
// `pulumi stack init dev && pulumi config set aws:region eu-central-1`; then `pulumi preview`.
import * as gpupools from "@pulumi/gpupools";

const platform = new gpupools.GpuPlatform("gpupools", {
    cloud: "aws",
    cluster: { name: "ml-dev", authorizedCidrs: ["203.0.113.0/24"] },
    pools: [
        { name: "infer", instanceType: "g5.2xlarge", maxNodes: 6, spot: true, sharing: { mode: "time-slicing", replicas: 4 } },
        { name: "train", instanceType: "p4de.24xlarge", maxNodes: 2, sharing: { mode: "mig", migProfile: "3g.40gb" } },
    ],
    teams: [{ name: "research", gpus: { train: 24, infer: 8 } }],
});

export const kubeconfig = platform.kubeconfig;
export const pools = platform.poolDetails;
