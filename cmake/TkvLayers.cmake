# The layer rule (DESIGN.md), enforced by the build: TKV_LAYER_<layer> lists the
# layers <layer> may include directly besides itself; the compiler sees those
# and what their headers reach (tkv_layer_closure). scripts/ci/check-layers.py reads
# this table too, so it is the one place to change the rule.
set(TKV_LAYERS base device quant kernels io tokenizer tensor ops kvcache model sampling runtime api eval server)
set(TKV_LAYER_base "")
set(TKV_LAYER_device base)
set(TKV_LAYER_quant base)
set(TKV_LAYER_kernels base device quant)
set(TKV_LAYER_io base quant)
set(TKV_LAYER_tokenizer base io)
set(TKV_LAYER_tensor base device quant kernels)
set(TKV_LAYER_ops base device quant kernels tensor)
set(TKV_LAYER_kvcache base device quant kernels)
set(TKV_LAYER_model base device quant kernels io ops kvcache)
set(TKV_LAYER_sampling base)
set(TKV_LAYER_runtime base device quant kernels io tokenizer ops kvcache model sampling)
set(TKV_LAYER_api base device quant kernels io tokenizer ops kvcache model sampling runtime)
set(TKV_LAYER_server base api runtime)
# eval drives engines through the public API only (include/turbokv/).
set(TKV_LAYER_eval base)
# Layers that also see the public API headers in include/turbokv/.
set(TKV_LAYERS_WITH_PUBLIC_API api server eval)
# Public headers every layer sees: base/status.h builds on the public Status, so
# the API and the engine share one error type.
set(TKV_PUBLIC_HEADERS_EVERYWHERE status.h)

# tkv_layer_closure(<layer> <out-var>): <layer> and every layer below it that
# its headers may reach (the allowed layers, their allowed layers, ...): a
# tokenizer file may include io/gguf.h, which includes quant/ggml_types.h.
function(tkv_layer_closure layer out)
  if(NOT DEFINED TKV_LAYER_${layer})
    message(FATAL_ERROR "src/${layer} has no layer rule: add TKV_LAYER_${layer} to cmake/TkvLayers.cmake")
  endif()
  set(seen ${layer})
  set(todo ${TKV_LAYER_${layer}})
  while(todo)
    list(POP_FRONT todo l)
    if(NOT l IN_LIST seen)
      list(APPEND seen ${l})
      list(APPEND todo ${TKV_LAYER_${l}})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# tkv_layer_view(<layer> <out-var>): the include directory that shows <layer>
# only itself and the layers below it (tkv_layer_closure):
# build/layer-include/<layer>/<l> is a symlink to src/<l>, so "base/status.h"
# style paths keep working; turbokv/<h> links the TKV_PUBLIC_HEADERS_EVERYWHERE.
function(tkv_layer_view layer out)
  tkv_layer_closure(${layer} visible)
  set(dir ${CMAKE_BINARY_DIR}/layer-include/${layer})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  foreach(l ${visible})
    if(EXISTS ${CMAKE_SOURCE_DIR}/src/${l})
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${l} ${dir}/${l} SYMBOLIC)
    endif()
  endforeach()
  file(MAKE_DIRECTORY ${dir}/turbokv)
  foreach(h ${TKV_PUBLIC_HEADERS_EVERYWHERE})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/include/turbokv/${h} ${dir}/turbokv/${h} SYMBOLIC)
  endforeach()
  set(${out} ${dir} PARENT_SCOPE)
endfunction()

# Include directories of the layer target <name> (src/<layer>): PRIVATE, its
# own view; INTERFACE, the same view but only for consumers that are not layer
# targets (tests, tools, bench, fuzzers see the layers they link), so a layer
# never inherits a view through what it links.
function(tkv_layer_includes name layer)
  tkv_layer_view(${layer} view)
  set(dirs ${view})
  if(layer IN_LIST TKV_LAYERS_WITH_PUBLIC_API)
    list(APPEND dirs ${CMAKE_SOURCE_DIR}/include)
  endif()
  set_target_properties(${name} PROPERTIES TKV_LAYER ${layer})
  set(outside "$<STREQUAL:$<TARGET_PROPERTY:TKV_LAYER>,>")
  get_target_property(type ${name} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${name} PRIVATE ${dirs})
  endif()
  target_include_directories(${name} INTERFACE "$<${outside}:${dirs}>"
                             "$<${outside}:${CMAKE_SOURCE_DIR}/include>")
endfunction()
