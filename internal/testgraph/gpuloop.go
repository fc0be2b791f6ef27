package testgraph

// GPULoop is a v1 while loop on the GPU, in text format: its Merge ("merge") reads the
// loop's Enter ("enter") and, by the back edge, its NextIteration ("next"), which reads the
// body ("body", a Relu of the Switch's true output); "exit" leaves the loop.
const GPULoop = `
node { name: "x" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "pred" op: "Placeholder" device: "/device:GPU:0" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "enter" op: "Enter" input: "x" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "frame_name" value { s: "f" } } }
node { name: "enter_p" op: "Enter" input: "pred" device: "/device:GPU:0" attr { key: "T" value { type: DT_BOOL } } attr { key: "frame_name" value { s: "f" } } attr { key: "is_constant" value { b: true } } }
node { name: "merge" op: "Merge" input: "enter" input: "next" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "cond" op: "LoopCond" input: "enter_p" device: "/device:GPU:0" }
node { name: "switch" op: "Switch" input: "merge" input: "cond" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "body" op: "Relu" input: "switch:1" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "next" op: "NextIteration" input: "body" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "exit" op: "Exit" input: "switch" device: "/device:GPU:0" attr { key: "T" value { type: DT_FLOAT } } }
`
