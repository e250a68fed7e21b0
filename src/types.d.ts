// Text imports embedded by Bun (migrations, OpenAPI document).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.yaml" {
  const text: string;
  export default text;
}
// File imports (`with { type: "file" }`): the path of the embedded copy.
declare module "*/standalone.js" {
  const path: string;
  export default path;
}
