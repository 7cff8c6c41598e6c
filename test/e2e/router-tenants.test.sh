# Issue 25, tenants: a router watching every namespace, with home namespace "tenants". A workload in namespace
# "evil" declares the home member's alias (to make it ambiguous: its users would get 400) and a name the home
# namespace does not declare (to receive requests meant for it). Neither works: plain names resolve at home
# only; evil's models are reached by "evil/<model>" alone, and its member is sent the name without the
# qualifier. GET /v1/models lists them so, in OpenAI's list shape.
ns=tenants
router_setup --terminate-ms 200 --load-ms 200

create_members "$ns" m-a
create_members evil e-a
# The home member's server answers only to home-llama (the simulator's annotation), so an answer names who
# served it: home-llama from m-a; e-a, a vLLM member with no served name in the simulator, answers to
# whatever it is sent (a llama.cpp member would answer with its own name).
kubectl_admin -n evil patch inferenceservice e-a --type=merge -p '{"spec":{"runtime":"vllm"}}' >/dev/null
kubectl_admin -n "$ns" annotate inferenceservice m-a sim.modelpool.test/served-model=home-llama \
	modelpool-operator.dev/served-model=home-llama modelpool-operator.dev/model-aliases=llama >/dev/null
kubectl_admin -n evil annotate inferenceservice e-a modelpool-operator.dev/model-aliases='llama, secret' >/dev/null
create_pool "$ns" pool m-a m-a
create_pool evil epool e-a e-a
wait_for 60 pool_is pool Ready m-a "$ns"
wait_for 60 pool_is epool Ready e-a evil
router_up --home-namespace "$ns"
url="http://127.0.0.1:$(router_port api)"

# ask MODEL: prints the status; the answer goes to $MP_STATE_DIR/body.
ask() { router_post /v1/chat/completions "{\"model\":\"$1\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"; }

log "GET /v1/models: home names plain, evil's qualified, in OpenAI's list shape"
curl -fsS "$url/v1/models" >"$MP_STATE_DIR/models"
expect_eq "ids" "evil/e-a evil/llama evil/secret home-llama llama m-a" \
	"$(jq -r '[.data[].id] | sort | join(" ")' "$MP_STATE_DIR/models")"
expect_eq "list shape" "list true" \
	"$(jq -r '"\(.object) \(all(.data[]; .object == "model" and (.id | type) == "string" and (.created | type) == "number" and (.owned_by | type) == "string"))"' "$MP_STATE_DIR/models")"
expect_eq "namespace of evil/secret" evil \
	"$(jq -r '.data[] | select(.id == "evil/secret") | .modelpool.namespace' "$MP_STATE_DIR/models")"

log "the alias both namespaces declare is the home member's, not ambiguous"
expect_eq "llama" 200 "$(ask llama)"
expect_eq "llama answered by" home-llama "$(reply_field .model)"
expect_eq "m-a" 200 "$(ask m-a)"

log "a name only evil declares is not reachable unqualified"
expect_eq "secret" 404 "$(ask secret)"
expect_eq "secret code" model_not_found "$(reply_field .error.code)"
grep -qF "does not exist in namespace $ns (a model of another namespace is named '<namespace>/<model>')" \
	<<<"$(reply_field .error.message)" || fail "the 404 does not say where plain names resolve: $(cat "$MP_STATE_DIR/body")"
expect_eq "e-a" 404 "$(ask e-a)"

log "evil's models by their qualified names; the member sees no qualifier"
expect_eq "evil/secret" 200 "$(ask evil/secret)"
expect_eq "evil/secret answered as" secret "$(reply_field .model)"
expect_eq "evil/llama" 200 "$(ask evil/llama)"
expect_eq "evil/llama answered as" llama "$(reply_field .model)"
expect_eq "home qualified: tenants/llama" 200 "$(ask "$ns/llama")"
expect_eq "tenants/llama answered by" home-llama "$(reply_field .model)"
expect_eq "nobody's namespace" 404 "$(ask nobody/llama)"

stop_router
stop_operator
stop_slot_check
