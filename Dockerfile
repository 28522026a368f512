# The hypernode-scheduler image: manifests/install/03-deployment.yaml runs /kube-scheduler,
# manifests/install/06-controller-deployment.yaml runs /hypernode-controller.
#   docker build -t <registry>/hypernode-scheduler:<tag> .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/kube-scheduler ./cmd/kube-scheduler && \
    CGO_ENABLED=0 go build -o /out/hypernode-controller ./cmd/hypernode-controller

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/kube-scheduler /kube-scheduler
COPY --from=build /out/hypernode-controller /hypernode-controller
USER 65532:65532
ENTRYPOINT ["/kube-scheduler"]
