// What Node code sizes worker pools by: os.availableParallelism() (Node 18.14+), else os.cpus().
const os = require("os");
console.log(typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length);
