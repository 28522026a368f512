# The hypernode-scheduler image that manifests/install/03-deployment.yaml runs.
#   docker build -t <registry>/hypernode-scheduler:<tag> .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/kube-scheduler ./cmd/kube-scheduler

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/kube-scheduler /kube-scheduler
USER 65532:65532
ENTRYPOINT ["/kube-scheduler"]
