#include "core/analysis/fix_suggestion.h"

#include <fmt/format.h>

namespace meshscope {

FixSuggestion suggestFix(OriginClass origin, std::string_view mesh, int batchDim) {
    switch (origin) {
        case OriginClass::UnshardedParam:
            return {
                "shard the parameter too (add it to the parallelize plan, or group tied "
                "modules so they share one placement)",
                fmt::format("module.weight = nn.Parameter(distribute_tensor(module.weight, "
                            "{}, [Replicate()]))",
                            mesh)};
        case OriginClass::CreatedInForward:
            return {"create the tensor from a DTensor (`*_like`) or promote it explicitly",
                    fmt::format("mask = DTensor.from_local(mask, {}, [Replicate()])", mesh)};
        case OriginClass::StrippedDTensor:
            return {
                "keep the DTensor instead of its local shard, or wrap the local computation "
                "with local_map / register_sharding",
                "out = local_map(fn, out_placements=[Shard(0)])(x)"};
        case OriginClass::InputData:
            return {
                "distribute each batch: every rank's batch is its shard of the global batch",
                fmt::format("batch = DTensor.from_local(batch, {}, [Shard({})])", mesh, batchDim)};
        case OriginClass::OptimizerState:
            return {
                "create optimizer state with *_like(param) and keep hyperparameters as "
                "Python floats",
                "state['exp_avg'] = torch.zeros_like(param)  # lr = float(lr)"};
        case OriginClass::WeightLoading:
            return {
                "distribute the full tensor before copying it into a DTensor, or use the "
                "DCP state-dict helpers",
                "param.copy_(distribute_tensor(full, param.device_mesh, param.placements))"};
        case OriginClass::Unknown:
            break;
    }
    return {"no automatic suggestion: follow the evidence and the creating frame", ""};
}

std::string_view describeOrigin(OriginClass origin) {
    switch (origin) {
        case OriginClass::UnshardedParam:
            return "a parameter or buffer left out of the sharding plan";
        case OriginClass::CreatedInForward:
            return "a tensor created inside forward";
        case OriginClass::StrippedDTensor:
            return "a DTensor stripped to a plain tensor";
        case OriginClass::InputData:
            return "input data not distributed";
        case OriginClass::OptimizerState:
            return "optimizer or grad-clipping state";
        case OriginClass::WeightLoading:
            return "weights loaded or synced as plain tensors";
        case OriginClass::Unknown:
            break;
    }
    return "origin unknown";
}

}  // namespace meshscope
